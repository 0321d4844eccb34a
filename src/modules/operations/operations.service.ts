import { type Caller, requireInstall } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { Page } from '../../http/pagination.js';
import type { OperationJobName } from '../../jobs/catalog.js';
import { scheduleAt } from '../../jobs/due.js';
import type { Outbox } from '../../mail/outbox.js';
import { operationFinishedMail } from '../../mail/templates/operation-finished.js';
import type { InstallRow } from '../installs/installs.repo.js';
import { assertProvisioned, type InstallsService } from '../installs/installs.service.js';
import * as repo from './operations.repo.js';

export type { OperationRow } from './operations.repo.js';

/** Every kind of asynchronous request; the operation's `type`. */
export const OPERATION_TYPES = [
  'provision_install',
  'copy_install',
  'create_backup',
  'restore_backup',
  'refresh_disk_usage',
  'purge_cache',
] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

/** An operation's visible status: queued -> in_progress -> completed | failed. */
export const OPERATION_STATUSES = ['queued', 'in_progress', 'completed', 'failed'] as const;
const TERMINAL = new Set(['completed', 'failed']);

/** The words of notification mails and busy messages, per type. */
const TITLES: Record<OperationType, string> = {
  provision_install: 'Provisioning',
  copy_install: 'Copy',
  create_backup: 'Backup',
  restore_backup: 'Restore',
  refresh_disk_usage: 'Disk usage refresh',
  purge_cache: 'Cache purge',
};

export interface OperationsDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'findById'>;
  outbox: Pick<Outbox, 'add'>;
}

export interface NewOperation {
  install: { id: string; account_id: string };
  type: OperationType;
  resource: { type: string; id: string };
  input?: Record<string, unknown>;
  /** Expected duration in seconds (expected_at = now + this). */
  expectedSeconds?: number;
}

/** How an operation ended, for the notification mail. */
export interface Outcome {
  /** Extra lines of the mail (label, value). */
  details?: [string, string][];
  /** On failure: a clearer error than the one given (what failed, what was kept). */
  error?: string;
}

/** What a new operation does to an install: reads it (backup, copy source) or writes it. */
export type Intent = 'read' | 'write';

/** The intents of an open operation on `installId`. */
function intentsOf(op: repo.OperationRow, installId: string): Intent | null {
  if (op.type === 'copy_install') return op.install_id === installId ? 'write' : 'read';
  if (op.type === 'create_backup') return 'read';
  if (op.type === 'provision_install' || op.type === 'restore_backup') return 'write';
  return null;
}

function describeBusy(op: repo.OperationRow, installId: string, names: Map<string, string>): string {
  const ref = `(operation ${op.id})`;
  switch (op.type) {
    case 'provision_install':
      return `it is being provisioned ${ref}`;
    case 'restore_backup':
      return `a restore is in progress ${ref}`;
    case 'create_backup':
      return `a backup is in progress ${ref}`;
    case 'copy_install': {
      const source = String((op.input as { source_install_id?: string }).source_install_id ?? '');
      return op.install_id === installId
        ? `a copy from install ${names.get(source) ?? source} is being written to it ${ref}`
        : `it is the source of a copy in progress ${ref}`;
    }
    default:
      return `an operation is in progress ${ref}`;
  }
}

/** Projection of an operation row into the Operation record (GET /v1/operations/{id}). */
export function toOperation(row: repo.OperationRow) {
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    resource: { type: row.resource_type, id: row.resource_id },
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    completed_at: row.completed_at?.toISOString() ?? null,
    error: row.error,
  };
}

export function createOperationsService({ db, clock, installs, outbox }: OperationsDeps) {
  /** The notification mails (C6, B3, R3), in the transaction that ends the operation. */
  async function notify(tx: Db, op: repo.OperationRow, install: InstallRow | null, outcome: Outcome) {
    const emails = (op.input as { notification_emails?: string[] }).notification_emails ?? [];
    if (emails.length === 0 || !op.completed_at) return;
    const mail = operationFinishedMail({
      operation: {
        id: op.id,
        type: op.type,
        status: op.status as 'completed' | 'failed',
        error: op.error,
        created_at: op.created_at,
        started_at: op.started_at,
        completed_at: op.completed_at,
      },
      install: { id: op.install_id, name: install?.name ?? op.install_id },
      title: TITLES[op.type as OperationType] ?? op.type,
      details: outcome.details ?? [],
    });
    await outbox.add(
      tx,
      [...new Set(emails.map((e) => e.toLowerCase()))].map((to) => ({
        operation_id: op.id,
        event: `${op.type}.${op.status}`,
        to,
        ...mail,
      })),
    );
  }

  /** Ends an open operation once: `apply` makes the resource's effects in the same transaction. */
  async function end(
    id: string,
    status: 'completed' | 'failed',
    error: string | null,
    apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>,
  ): Promise<boolean> {
    return withTransaction(db, async (tx) => {
      const op = await repo.lockOperation(tx, id);
      if (!op || TERMINAL.has(op.status)) return false;
      const outcome = (await apply(tx, op)) ?? {};
      const now = clock.now();
      const ended = await repo.updateOperation(tx, id, {
        status,
        error: status === 'failed' ? (outcome.error ?? error) : null,
        started_at: op.started_at ?? now,
        completed_at: now,
        expected_at: null,
      });
      await notify(tx, ended, await installs.findById(op.install_id, tx), outcome);
      return true;
    });
  }

  return {
    /** GET /v1/operations/{id}: visible like its install (404 foreign, partial scoped). */
    async get(caller: Caller, id: string) {
      const op = await repo.findOperation(db, id);
      if (!op) throw Errors.notFound();
      requireInstall(caller, { id: op.install_id, account_id: op.account_id }, 'installs:read');
      return op;
    },

    /** GET /v1/installs/{id}/operations, newest first. */
    async listForInstall(caller: Caller, installId: string, page: Page) {
      await installs.requireInstall(caller, installId, 'installs:read');
      return repo.listForInstall(db, installId, page);
    },

    /** In the caller's transaction: a queued operation. */
    create(tx: Db, input: NewOperation) {
      const now = clock.now();
      return repo.insertOperation(tx, values(input, now));
    },

    /** Like create, but null when the install already has an open one of this type (M8, one restore). */
    createUnlessOpen(tx: Db, input: NewOperation & { type: 'refresh_disk_usage' | 'restore_backup' }) {
      return repo.insertUnlessOpen(tx, { ...values(input, clock.now()), type: input.type });
    },

    /**
     * G12: a busy install is a 400 that says what it is busy with. A write (copy into, restore)
     * conflicts with any open read or write of the install; a read (backup, copy from) with a write.
     * Call with the install row locked, so two requests cannot both pass.
     */
    async assertIdle(tx: Db, install: InstallRow, intent: Intent, field: string) {
      assertProvisioned(install, field);
      const open = await repo.openTouching(tx, install.id);
      const conflict = open.find((op) => {
        const other = intentsOf(op, install.id);
        return other !== null && (intent === 'write' || other === 'write');
      });
      if (!conflict) return;
      const source = (conflict.input as { source_install_id?: string }).source_install_id;
      const names = new Map<string, string>();
      if (source) names.set(source, (await installs.findById(source, tx))?.name ?? source);
      throw Errors.valueUnavailable(
        'install',
        field,
        `Install ${install.name} is busy: ${describeBusy(conflict, install.id, names)}`,
        'install_busy',
      );
    },

    /** Job step: the operation if there is work left (queued becomes in_progress), else null. */
    async begin(id: string, onStart?: (tx: Db, op: repo.OperationRow) => Promise<void>) {
      return withTransaction(db, async (tx) => {
        const op = await repo.lockOperation(tx, id);
        if (!op || TERMINAL.has(op.status)) return null;
        if (op.status !== 'queued') return op;
        const started = await repo.updateOperation(tx, id, {
          status: 'in_progress',
          started_at: clock.now(),
        });
        await onStart?.(tx, started);
        return started;
      });
    },

    /** Job step: the driver said "ask again at `checkAt`": due work re-runs the job then. */
    async waitUntil(op: repo.OperationRow, checkAt: Date, job: OperationJobName) {
      await withTransaction(db, async (tx) => {
        await scheduleAt(tx, `operation:${op.id}`, job, { operation_id: op.id }, checkAt);
        await repo.updateOperation(tx, op.id, { expected_at: checkAt });
      });
    },

    /** Job step: runs `fn` with the open operation locked (null when it has ended or is gone). */
    async withLocked<T>(id: string, fn: (tx: Db, op: repo.OperationRow) => Promise<T>): Promise<T | null> {
      return withTransaction(db, async (tx) => {
        const op = await repo.lockOperation(tx, id);
        if (!op || TERMINAL.has(op.status)) return null;
        return fn(tx, op);
      });
    },

    /** Job step: private progress (a checkpoint's id), written in the caller's transaction. */
    setState: (tx: Db, id: string, state: Record<string, unknown>) => repo.updateOperation(tx, id, { state }),

    /** Completes the operation once, with its effects and notification mails in one transaction. */
    complete: (id: string, apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>) =>
      end(id, 'completed', null, apply),

    /** Fails the operation once (retries exhausted, or a rule found at run time), mailing it too. */
    fail: (
      id: string,
      error: string,
      apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>,
    ) => end(id, 'failed', error, apply),

    find: (id: string, tx: Db = db) => repo.findOperation(tx, id),
    openOfType: (installId: string, type: OperationType, tx: Db = db) => repo.openOfType(tx, installId, type),
    lastCompleted: (installId: string, type: OperationType) => repo.lastCompleted(db, installId, type),
    latestSince: repo.latestSince,
  };

  function values(input: NewOperation, now: Date) {
    return {
      account_id: input.install.account_id,
      install_id: input.install.id,
      type: input.type,
      status: 'queued',
      resource_type: input.resource.type,
      resource_id: input.resource.id,
      input: input.input ?? {},
      expected_at:
        input.expectedSeconds !== undefined ? new Date(now.getTime() + input.expectedSeconds * 1000) : null,
      created_at: now,
    };
  }
}

export type OperationsService = ReturnType<typeof createOperationsService>;
