import { type Action, type Caller, requireAccount, requireInstall } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { OperationJobName } from '../../jobs/catalog.js';
import { scheduleAt } from '../../jobs/due.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { Outbox } from '../../mail/outbox.js';
import { operationFinishedMail } from '../../mail/templates/operation-finished.js';
import { type Resealer, resealEach, type SecretBox } from '../../secrets.js';
import type { EventRecorder, EventType } from '../events/events.service.js';
import {
  assertShape,
  inputOf,
  isOperationType,
  notificationEmailsOf,
  OPERATIONS,
  type OperationInput,
  type OperationResult,
  type OperationState,
  type OperationType,
  resultOf,
  stateOf,
} from './operation-types.js';
import * as repo from './operations.repo.js';

export {
  inputOf,
  OPERATION_TYPES,
  type OperationInput,
  type OperationState,
  type OperationType,
  stateOf,
} from './operation-types.js';

export type { OperationRow } from './operations.repo.js';

/**
 * An install as operations read it (the installs module's row has these fields, and more). Operations
 * sit below installs (installs start operations), so they name what they need instead of importing it.
 */
export interface InstallRef {
  id: string;
  name: string;
  status: string;
}

/** What operations need of the installs service (it gives more). */
export interface InstallLookup {
  /** 404 when the caller cannot see the install, 403 when the role does not allow `action`. */
  requireInstall(caller: Caller, installId: string, action: Action): Promise<unknown>;
  findById(installId: string | null, tx?: Db): Promise<InstallRef | null>;
}

/** G12: an install still being provisioned is busy (a 400 install_busy on `field`). */
export function assertProvisioned(install: { name: string; status: string }, field = 'install_id') {
  if (install.status !== 'pending') return;
  throw Errors.valueUnavailable(
    'install',
    field,
    `Install ${install.name} is busy: it is still being provisioned (status pending)`,
    'install_busy',
  );
}

/** An operation's visible status: queued -> in_progress -> completed | failed. */
export const OPERATION_STATUSES = ['queued', 'in_progress', 'completed', 'failed'] as const;
const TERMINAL = new Set(['completed', 'failed']);

export interface OperationsDeps {
  db: Db;
  clock: Clock;
  installs: InstallLookup;
  outbox: Pick<Outbox, 'add'>;
  queue: Pick<JobQueue, 'enqueue'>;
  /** Issue 22: the events of the operation's state changes, in the same transactions. */
  events: EventRecorder;
  /** Issue 21: seals the secret of a result (provisioning's administrator password) until it is shown. */
  secretBox: SecretBox;
}

/** What an operation's secret is sealed for. */
const secretContext = (operationId: string) => `operation-secret:${operationId}`;

/**
 * Issue 21: who is shown an operation's secret (and so erases it by reading): an owner of the
 * account, authenticated as themselves. Not another role (they read the operation without it), and
 * not through a scoped credential (a leaked one must not give away a site's administrator).
 */
function seesSecrets(caller: Caller, accountId: string): boolean {
  return caller.memberships.get(accountId)?.roles === 'owner' && caller.credential === undefined;
}

/** Issue 22: the resource events of an operation type's changes (besides operation.completed/failed). */
const RESOURCE_EVENTS: Partial<
  Record<string, { started?: EventType; completed?: EventType; failed?: EventType }>
> = {
  create_backup: { started: 'backup.started', completed: 'backup.completed', failed: 'backup.failed' },
  restore_backup: { started: 'restore.started', completed: 'restore.completed', failed: 'restore.failed' },
  copy_install: {
    started: 'install_copy.started',
    completed: 'install_copy.completed',
    failed: 'install_copy.failed',
  },
  provision_install: { completed: 'install.provisioned', failed: 'install.provision_failed' },
  transfer_site: {
    started: 'site_transfer.started',
    completed: 'site_transfer.completed',
    failed: 'site_transfer.failed',
  },
  refresh_disk_usage: { completed: 'disk_usage.refreshed' },
  order_certificate: { completed: 'certificate.issued' },
};

/** The events of an operation entering `phase`, in the transaction that moves it. */
async function recordPhase(
  events: EventRecorder,
  tx: Db,
  op: repo.OperationRow,
  phase: 'started' | 'completed' | 'failed',
) {
  const base = {
    account_id: op.account_id,
    install_id: op.install_id,
    data: { operation_id: op.id, operation_type: op.type, status: op.status, error: op.error },
  };
  const resourceEvent = RESOURCE_EVENTS[op.type]?.[phase];
  if (resourceEvent)
    await events.record(tx, {
      ...base,
      type: resourceEvent,
      resource: { type: op.resource_type, id: op.resource_id },
    });
  if (phase !== 'started')
    await events.record(tx, {
      ...base,
      type: `operation.${phase}`,
      resource: { type: 'operation', id: op.id },
    });
}

/** A new operation of type `T`: its input has that type's one shape (operation-types.ts). */
export type NewOperation<T extends OperationType = OperationType> = {
  [K in T]: {
    /** The install worked on; `id` null for site-level work (a site transfer) on the account. */
    install: { id: string | null; account_id: string };
    type: K;
    resource: { type: string; id: string };
    input: OperationInput<K>;
    /** Expected duration in seconds (expected_at = now + this). */
    expectedSeconds?: number;
  };
}[T];

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
  // Issue 30: a move copies the install while it serves: writes wait for it, reads do not. Once
  // switched it holds nothing (its old server only passes requests on, then is cleaned; #241).
  if (op.type === 'move_install') return stateOf(op, 'move_install').phase === 'switched' ? null : 'read';
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
    case 'move_install':
      return `it is being moved to another hosting server ${ref}`;
    case 'copy_install': {
      const source = inputOf(op, 'copy_install').source_install_id;
      return op.install_id === installId
        ? `a copy from install ${names.get(source) ?? source} is being written to it ${ref}`
        : `it is the source of a copy in progress ${ref}`;
    }
    default:
      return `an operation is in progress ${ref}`;
  }
}

/**
 * Projection of an operation row into the Operation record (GET /v1/operations/{id}). `password`:
 * the result's secret, opened for the one read that shows it.
 */
export function toOperation(row: repo.OperationRow, password?: string) {
  const admin = resultOf(row)?.wordpress_admin;
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    resource: { type: row.resource_type, id: row.resource_id },
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    completed_at: row.completed_at?.toISOString() ?? null,
    error: row.error,
    ...(row.waiting_reason && !TERMINAL.has(row.status) && { waiting_reason: row.waiting_reason }),
    ...(admin && {
      wordpress_admin: {
        username: admin.username,
        ...(password !== undefined && { password }),
        login_url: admin.login_url,
      },
    }),
  };
}

function values<T extends OperationType>(input: NewOperation<T>, now: Date) {
  assertShape(input.type, 'input', input.input);
  return {
    account_id: input.install.account_id,
    install_id: input.install.id,
    type: input.type,
    status: 'queued',
    resource_type: input.resource.type,
    resource_id: input.resource.id,
    input: input.input,
    expected_at:
      input.expectedSeconds !== undefined ? new Date(now.getTime() + input.expectedSeconds * 1000) : null,
    created_at: now,
  };
}

/**
 * Creating operations needs nothing but the database and the queue: the part of the operations
 * service that services below it (installs, which operations reads) are given, so nothing is wired
 * late.
 */
export function createOperationRecords({ clock, queue }: { clock: Clock; queue: Pick<JobQueue, 'enqueue'> }) {
  /** G10: an operation's step job carries its type's name; queued now, or due at `runAt`. */
  async function queueStep(tx: Db, op: repo.OperationRow & { type: OperationJobName }, runAt?: Date) {
    const payload = { operation_id: op.id };
    if (runAt) await scheduleAt(tx, `operation:${op.id}`, op.type, payload, runAt);
    else await queue.enqueue(tx, op.type, payload);
  }

  return {
    /**
     * In the caller's transaction: a queued operation and its step job, queued now or (with `runAt`)
     * due work that follows the service clock and survives restarts. Both commit with the caller's
     * writes, or neither does.
     */
    async start<T extends OperationType>(tx: Db, input: NewOperation<T>, runAt?: Date) {
      const op = await repo.insertOperation(tx, values(input, clock.now()));
      await queueStep(tx, { ...op, type: input.type }, runAt);
      return op;
    },

    /**
     * Like start, unless the install has a queued operation of this type: that one is answered (locked
     * until the caller commits), as its step reads the whole state when it begins (issue 21 routing:
     * changes in a burst are applied once). One that has begun does not absorb it: a new one is queued.
     */
    async startCoalesced<T extends 'apply_routing'>(tx: Db, input: NewOperation<T>) {
      const queued = input.install.id && (await repo.queuedOfTypeForUpdate(tx, input.install.id, input.type));
      if (queued) return queued;
      const op = await repo.insertOperation(tx, values(input, clock.now()));
      await queueStep(tx, { ...op, type: input.type });
      return op;
    },

    /** Like start, but null (nothing written) when the install already has an open one of this type (M8, one restore). */
    async startUnlessOpen<T extends 'refresh_disk_usage' | 'restore_backup'>(tx: Db, input: NewOperation<T>) {
      const op = await repo.insertUnlessOpen(tx, { ...values(input, clock.now()), type: input.type });
      if (op) await queueStep(tx, { ...op, type: input.type });
      return op;
    },
  };
}

export type OperationRecords = ReturnType<typeof createOperationRecords>;

export function createOperationsService({
  db,
  clock,
  installs,
  outbox,
  queue,
  events,
  secretBox,
}: OperationsDeps) {
  const records = createOperationRecords({ clock, queue });

  /** The notification mails (C6, B3, R3), in the transaction that ends the operation. */
  async function notify(tx: Db, op: repo.OperationRow, install: InstallRef | null, outcome: Outcome) {
    const emails = notificationEmailsOf(op);
    if (emails.length === 0 || !op.completed_at || !op.install_id) return;
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
      title: isOperationType(op.type) ? OPERATIONS[op.type].title : op.type,
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
    return withTransaction(db, (tx) => endWithin(tx, id, status, error, apply));
  }

  /** `end` inside the caller's transaction (a cancellation ends its operation with its resource). */
  async function endWithin(
    tx: Db,
    id: string,
    status: 'completed' | 'failed',
    error: string | null,
    apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>,
  ): Promise<boolean> {
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
    await recordPhase(events, tx, ended, status);
    return true;
  }

  return {
    /**
     * GET /v1/operations/{id}: visible like its install (404 foreign, partial scoped). Issue 21: a
     * completed operation's secret (provisioning's administrator password) is shown to the first
     * owner who reads it, and erased by that read (decisions.md: shown once).
     */
    async get(caller: Caller, id: string) {
      const op = await repo.findOperation(db, id);
      if (!op) throw Errors.notFound();
      // Site-level work (a transfer, A3): the billing roles of the account that holds the site.
      if (op.install_id === null) requireAccount(caller, op.account_id, 'transfers:manage');
      else requireInstall(caller, { id: op.install_id, account_id: op.account_id }, 'installs:read');
      if (!op.has_secret || op.status !== 'completed' || !seesSecrets(caller, op.account_id))
        return toOperation(op);
      const sealed = await withTransaction(db, (tx) => repo.takeSecret(tx, id));
      if (sealed === null) return toOperation(op);
      return toOperation(op, secretBox.open(sealed, secretContext(id)).toString('utf8'));
    },

    /**
     * Issue 21, in the transaction that completes the operation: what it gives its caller, and a
     * secret of it (sealed here) shown once by `get`.
     */
    async setResult(tx: Db, id: string, result: OperationResult, secret: string | null) {
      await repo.updateOperation(tx, id, {
        result,
        secret_sealed:
          secret === null ? null : secretBox.seal(Buffer.from(secret, 'utf8'), secretContext(id)),
      });
    },

    /** GET /v1/installs/{id}/operations, newest first. */
    async listForInstall(caller: Caller, installId: string, page: Page) {
      await installs.requireInstall(caller, installId, 'installs:read');
      return repo.listForInstall(db, installId, page);
    },

    ...records,

    /**
     * G12: a busy install is a 400 that says what it is busy with. A write (copy into, restore)
     * conflicts with any open read or write of the install; a read (backup, copy from) with a write.
     * Call with the install row locked, so two requests cannot both pass.
     */
    async assertIdle(tx: Db, install: InstallRef, intent: Intent, field: string) {
      assertProvisioned(install, field);
      const open = await repo.openTouching(tx, install.id);
      const conflict = open.find((op) => {
        const other = intentsOf(op, install.id);
        return other !== null && (intent === 'write' || other === 'write');
      });
      if (!conflict) return;
      const source =
        conflict.type === 'copy_install' ? inputOf(conflict, 'copy_install').source_install_id : null;
      const names = new Map<string, string>();
      if (source) names.set(source, (await installs.findById(source, tx))?.name ?? source);
      throw Errors.valueUnavailable(
        'install',
        field,
        `Install ${install.name} is busy: ${describeBusy(conflict, install.id, names)}`,
        'install_busy',
      );
    },

    /** Job code: whether an operation of `type` on the resource is queued or in progress. */
    async isOpenFor(installId: string, type: OperationType, resourceId: string | null) {
      const open = await repo.openTouching(db, installId);
      return open.some((op) => op.type === type && op.resource_id === resourceId);
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
        await recordPhase(events, tx, started, 'started');
        return started;
      });
    },

    /** Job step: the driver said "ask again at `checkAt`": due work re-runs the job then. */
    async waitUntil(op: repo.OperationRow, checkAt: Date) {
      if (!isOperationType(op.type)) throw new Error(`operation ${op.id} has an unknown type ${op.type}`);
      // The step job of an operation is named after its type (jobs/catalog.ts).
      const job: OperationJobName = op.type;
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

    /** Job step: private progress (a checkpoint's id), in its type's shape, in the caller's transaction. */
    setState<T extends OperationType>(tx: Db, id: string, type: T, state: OperationState<T>) {
      assertShape(type, 'state', state);
      return repo.updateOperation(tx, id, { state });
    },

    /** Completes the operation once, with its effects and notification mails in one transaction. */
    complete: (id: string, apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>) =>
      end(id, 'completed', null, apply),

    /** Fails the operation once (retries exhausted, or a rule found at run time), mailing it too. */
    fail: (
      id: string,
      error: string,
      apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>,
    ) => end(id, 'failed', error, apply),

    /** Like fail, in the caller's transaction (the resource and its operation end together). */
    failWithin: (
      tx: Db,
      id: string,
      error: string,
      apply: (tx: Db, op: repo.OperationRow) => Promise<Outcome | undefined>,
    ) => endWithin(tx, id, 'failed', error, apply),

    find: (id: string, tx: Db = db) => repo.findOperation(tx, id),
    openOfType: (installId: string, type: OperationType, tx: Db = db) => repo.openOfType(tx, installId, type),
    lastCompleted: (installId: string, type: OperationType) => repo.lastCompleted(db, installId, type),
    /** The newest operation of a type on an install created after `since` whose input has `key: value`. */
    latestSince: <T extends OperationType>(
      tx: Db,
      installId: string,
      type: T,
      since: Date,
      match: { key: keyof OperationInput<T> & string; value: string },
    ) => repo.latestSince(tx, installId, type, since, match),
  };
}

export type OperationsService = ReturnType<typeof createOperationsService>;

/** `hostplane reseal`: the operations' secrets not shown yet. Runs in the caller's transaction. */
export async function resealOperationSecrets(tx: Db, reseal: Resealer) {
  return resealEach(
    await repo.sealedSecrets(tx),
    reseal,
    (row) => (row.sealed === null ? null : { sealed: row.sealed, context: secretContext(row.id) }),
    (row, next) => repo.setSecret(tx, row.id, next),
  );
}
