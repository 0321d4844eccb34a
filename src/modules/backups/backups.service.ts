import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { type HostingDriver, type Snapshot, snapshotBytes } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationsService } from '../operations/operations.service.js';
import * as repo from './backups.repo.js';

export type { BackupRow } from './backups.repo.js';

export interface BackupsDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lock'>;
  operations: Pick<OperationsService, 'start' | 'startUnlessOpen' | 'assertIdle'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

export interface RestoreInput {
  notification_emails: string[];
  restore_database?: boolean;
  create_checkpoint?: boolean;
}

export function createBackupsService({ db, clock, installs, operations, driver }: BackupsDeps) {
  async function visibleBackup(
    caller: Caller,
    installId: string,
    backupId: string,
    action: 'installs:read' | 'installs:operate',
  ) {
    await installs.requireInstall(caller, installId, action);
    const backup = await repo.findBackup(db, backupId);
    if (!backup || backup.install_id !== installId) throw Errors.notFound();
    return backup;
  }

  /** R1: a backup of the install the caller may operate, completed (the checks before the transaction). */
  async function restorable(caller: Caller, installId: string, backupId: string) {
    const backup = await visibleBackup(caller, installId, backupId, 'installs:operate');
    if (backup.status !== 'completed') {
      throw Errors.invalidValue(
        'backup',
        'backup_id',
        `Backup ${backup.id} is ${backup.status}; only a completed backup can be restored`,
        'backup_not_completed',
      );
    }
    return backup;
  }

  /** In the restore's transaction: the install locked, and idle (G12: a restore writes it). */
  async function lockedIdle(tx: Db, installId: string) {
    const install = await installs.lock(tx, installId);
    if (!install) throw Errors.notFound();
    await operations.assertIdle(tx, install, 'write', 'install_id');
    return install;
  }

  /** R2: the restore operation's input (a checkpoint first unless refused) and its expected time. */
  function restorePlan(input: RestoreInput) {
    const createCheckpoint = input.create_checkpoint ?? true;
    return {
      input: {
        notification_emails: input.notification_emails,
        restore_database: input.restore_database ?? true,
        create_checkpoint: createCheckpoint,
      },
      expectedSeconds:
        driver.estimateSeconds('restore') + (createCheckpoint ? driver.estimateSeconds('backup') : 0),
    };
  }

  return {
    /** B1, B2: a `requested` backup and its operation; the job takes it from there. */
    async create(
      caller: Caller,
      installId: string,
      input: { description: string; notification_emails: string[] },
    ) {
      await installs.requireInstall(caller, installId, 'installs:operate');
      return withTransaction(db, async (tx) => {
        const install = await installs.lock(tx, installId);
        if (!install) throw Errors.notFound();
        await operations.assertIdle(tx, install, 'read', 'install_id');
        const now = clock.now();
        const backup = await repo.insertBackup(tx, {
          account_id: install.account_id,
          install_id: install.id,
          kind: 'manual',
          status: 'requested',
          description: input.description,
          // B2: the version now; the job records the version the backup actually holds.
          wordpress_version: install.wp_version,
          create_time: now,
        });
        const operation = await operations.start(tx, {
          install,
          type: 'create_backup',
          resource: { type: 'backup', id: backup.id },
          input: { notification_emails: input.notification_emails },
          expectedSeconds: driver.estimateSeconds('backup'),
        });
        await repo.updateBackup(tx, backup.id, { operation_id: operation.id });
        return { backup, operation };
      });
    },

    async list(caller: Caller, installId: string, page: Page) {
      await installs.requireInstall(caller, installId, 'installs:read');
      return repo.listBackups(db, installId, page);
    },

    get: (caller: Caller, installId: string, backupId: string) =>
      visibleBackup(caller, installId, backupId, 'installs:read'),

    /** R1-R3: restore an install from one of its completed backups; one restore at a time. */
    async restore(caller: Caller, installId: string, backupId: string, input: RestoreInput) {
      const backup = await restorable(caller, installId, backupId);
      const planned = restorePlan(input);
      return withTransaction(db, async (tx) => {
        const install = await lockedIdle(tx, installId);
        const operation = await operations.startUnlessOpen(tx, {
          install,
          type: 'restore_backup',
          resource: { type: 'backup', id: backup.id },
          input: planned.input,
          expectedSeconds: planned.expectedSeconds,
        });
        if (!operation) {
          throw Errors.valueUnavailable(
            'install',
            'install_id',
            `Install ${install.name} is busy: a restore is in progress`,
            'install_busy',
          );
        }
        return operation;
      });
    },

    /** Issue 22, `?dry_run=true`: the checks of `restore` (in a transaction that writes nothing) and what it would do. */
    async restoreDryRun(caller: Caller, installId: string, backupId: string, input: RestoreInput) {
      const backup = await restorable(caller, installId, backupId);
      const planned = restorePlan(input);
      await withTransaction(db, (tx) => lockedIdle(tx, installId));
      return {
        dry_run: true as const,
        operation: 'restore_backup' as const,
        install_id: installId,
        backup_id: backup.id,
        ...planned.input,
        expected_seconds: planned.expectedSeconds,
      };
    },

    // For the job handlers (backups.jobs.ts), in their transactions.

    find: (backupId: string, tx: Db = db) => repo.findBackup(tx, backupId),

    markInProgress: (tx: Db, backupId: string) =>
      repo.updateUnfinished(tx, backupId, { status: 'in_progress' }),

    /** B2: completed, with the version and size the backup holds; complete_time set now. */
    markCompleted: (tx: Db, backupId: string, snapshot: Snapshot) =>
      repo.updateUnfinished(tx, backupId, {
        status: 'completed',
        wordpress_version: snapshot.wp_version,
        size_bytes: snapshotBytes(snapshot),
        snapshot,
        complete_time: clock.now(),
      }),

    markAborted: (tx: Db, backupId: string) => repo.updateUnfinished(tx, backupId, { status: 'aborted' }),

    // Issue 30 (decision #226): a move carries the install's backups to its new server.

    /** The completed backups of the install whose snapshot a move carries. */
    async carriable(installId: string, tx: Db = db) {
      const rows = await repo.completedWithSnapshot(tx, installId);
      return rows.map((r) => ({ id: r.id, description: r.description, snapshot: r.snapshot as Snapshot }));
    },

    /** How many backups of the install are still being taken (a move does not switch meanwhile). */
    unfinished: (tx: Db, installId: string) => repo.countUnfinished(tx, installId),

    /** At the switch, in its transaction: the backup's snapshot as the new server holds it. */
    adoptSnapshot: (tx: Db, backupId: string, snapshot: Snapshot) =>
      repo.replaceSnapshot(tx, backupId, snapshot),

    /** R2: the checkpoint taken before a restore, a backup of its own (kept whatever the restore does). */
    insertCheckpoint: (
      tx: Db,
      install: { id: string; account_id: string; wp_version: string | null },
      operationId: string,
      restoring: string,
    ) =>
      repo.insertBackup(tx, {
        account_id: install.account_id,
        install_id: install.id,
        operation_id: operationId,
        kind: 'checkpoint',
        status: 'in_progress',
        description: `Checkpoint before restoring backup ${restoring}`,
        wordpress_version: install.wp_version,
        create_time: clock.now(),
      }),
  };
}

export type BackupsService = ReturnType<typeof createBackupsService>;
export { snapshotOf } from './backups.repo.js';
