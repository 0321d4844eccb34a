import type { Db } from '../../db/client.js';
import { type HostingDriver, installRef, type Snapshot } from '../../drivers/driver.js';
import type { JobContext, JobHandler } from '../../jobs/catalog.js';
import type { InstallRow, InstallsService } from '../installs/installs.service.js';
import {
  inputOf,
  type OperationRow,
  type OperationsService,
  stateOf,
} from '../operations/operations.service.js';
import { type BackupRow, type BackupsService, snapshotOf } from './backups.service.js';

export interface BackupJobsDeps {
  operations: Pick<
    OperationsService,
    'begin' | 'waitUntil' | 'complete' | 'fail' | 'withLocked' | 'setState'
  >;
  backups: Pick<
    BackupsService,
    'find' | 'markInProgress' | 'markCompleted' | 'markAborted' | 'insertCheckpoint'
  >;
  installs: Pick<InstallsService, 'findById' | 'applySoftware'>;
  driver: HostingDriver;
  /**
   * Issue 21: in the transaction that completes a restore, the install's routing applied again when
   * the driver keeps routing in the content (`routingInContent`: the backup brought its own).
   */
  requestRouting?: (tx: Db, install: { id: string; account_id: string; status: string }) => Promise<void>;
}

type OperationPayload = { operation_id: string };

const megabytes = (bytes: number | null) =>
  bytes === null ? '-' : `${(bytes / 1024 / 1024).toFixed(1)} MB (${bytes} bytes)`;

function checksumDetails(snapshot: Snapshot | null): [string, string][] {
  if (!snapshot?.checksums) return [];
  return [
    ['Files archive SHA-256', snapshot.checksums.files],
    ['Database dump SHA-256', snapshot.checksums.database],
  ];
}

function backupDetails(backup: BackupRow | null): [string, string][] {
  if (!backup) return [];
  return [
    ['Backup', `${backup.id} "${backup.description}"`],
    ['WordPress version', backup.wordpress_version ?? '-'],
    ['Size', megabytes(backup.size_bytes)],
    // Issue 16: a driver that archives real data reports the archive's checksums.
    ...checksumDetails(snapshotOf(backup)),
  ];
}

/** The create_backup and restore_backup jobs (jobs/catalog.ts). Each step is safe to run twice. */
export function createBackupJobs({ operations, backups, installs, driver, requestRouting }: BackupJobsDeps) {
  const create: JobHandler<OperationPayload> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id, async (tx, started) => {
        await backups.markInProgress(tx, started.resource_id);
      });
      if (!op) return;
      const install = await installs.findById(op.install_id);
      if (!install) return; // deleted: its operation and backups went with it
      const result = await driver.backup({ key: op.id, signal: ctx.signal }, installRef(install));
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async (tx) => ({
        details: backupDetails(await backups.markCompleted(tx, op.resource_id, result.value)),
      }));
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(operation_id, `The backup failed: ${error}`, async (tx, op) => ({
        details: backupDetails(await backups.markAborted(tx, op.resource_id)),
      }));
    },
  };

  /** R2: the checkpoint backup, taken (and completed) before anything is restored. */
  async function checkpoint(op: OperationRow, install: InstallRow, ctx: JobContext) {
    let checkpointId = stateOf(op, 'restore_backup').checkpoint_backup_id;
    if (!checkpointId) {
      checkpointId =
        (await operations.withLocked(op.id, async (tx, locked) => {
          const state = stateOf(locked, 'restore_backup');
          if (state.checkpoint_backup_id) return state.checkpoint_backup_id;
          const made = await backups.insertCheckpoint(tx, install, op.id, String(locked.resource_id));
          await operations.setState(tx, op.id, 'restore_backup', { ...state, checkpoint_backup_id: made.id });
          return made.id;
        })) ?? undefined;
    }
    if (!checkpointId) return { ready: false as const };
    const existing = await backups.find(checkpointId);
    if (existing?.status === 'completed') return { ready: true as const, id: checkpointId };
    const result = await driver.backup(
      { key: `${op.id}:checkpoint`, signal: ctx.signal },
      installRef(install),
    );
    if (!result.done) return { ready: false as const, checkAt: result.checkAt };
    await operations.withLocked(op.id, (tx) => backups.markCompleted(tx, checkpointId, result.value));
    return { ready: true as const, id: checkpointId };
  }

  const restore: JobHandler<OperationPayload> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      if (!op) return;
      const install = await installs.findById(op.install_id);
      if (!install) return;
      const input = inputOf(op, 'restore_backup');
      const backup = await backups.find(op.resource_id);
      const snapshot = backup && snapshotOf(backup);
      if (!backup || !snapshot) {
        await operations.fail(
          op.id,
          `Backup ${op.resource_id} no longer exists; nothing was restored`,
          async () => undefined,
        );
        return;
      }
      let checkpointId: string | null = null;
      if (input.create_checkpoint) {
        const step = await checkpoint(op, install, ctx);
        if (!step.ready) {
          if (step.checkAt) await operations.waitUntil(op, step.checkAt);
          return;
        }
        checkpointId = step.id;
      }
      const result = await driver.restore(
        { key: `${op.id}:restore`, signal: ctx.signal },
        { install: installRef(install), snapshot, restore_database: input.restore_database },
      );
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async (tx) => {
        // R-: the install runs the WordPress version the backup holds.
        await installs.applySoftware(tx, install.id, { wp_version: result.value.wp_version });
        if (driver.routingInContent) await requestRouting?.(tx, install);
        return {
          details: [
            ...backupDetails(backup),
            ['Database restored', input.restore_database ? 'yes' : 'no (files only)'],
            ['Checkpoint backup', checkpointId ?? 'none (create_checkpoint was false)'],
          ],
        };
      });
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(operation_id, `The restore failed: ${error}`, async (tx, op) => {
        const checkpointId = stateOf(op, 'restore_backup').checkpoint_backup_id;
        const checkpointRow = checkpointId ? await backups.find(checkpointId, tx) : null;
        const details: [string, string][] = [['Backup', op.resource_id]];
        if (checkpointRow && checkpointRow.status !== 'completed') {
          // R2: a failed checkpoint aborts the restore before anything was restored.
          await backups.markAborted(tx, checkpointRow.id);
          return {
            error: `The checkpoint backup failed, so nothing was restored: ${error}`,
            details: [...details, ['Checkpoint backup', `${checkpointRow.id} (aborted)`]],
          };
        }
        if (checkpointRow) details.push(['Checkpoint backup', `${checkpointRow.id} (kept)`]);
        return { details };
      });
    },
  };

  return { create, restore };
}
