import { type Static, type TObject, Type } from 'typebox';
import { Compile } from 'typebox/compile';

/**
 * Every kind of operation (the operation's `type`), with the one shape of its `input` (what the
 * request asked, written when the operation is created) and of its `state` (private progress a job
 * step writes). Each type's step job has the same name (jobs/catalog.ts). Both are checked where
 * they are read ({@link inputOf}, {@link stateOf}), as job payloads are checked where they are sent.
 */
const Nothing = Type.Object({});
const Emails = Type.Array(Type.String({ maxLength: 254 }), { maxItems: 50 });

export const OPERATIONS = {
  /** I7: makes a pending install active. */
  provision_install: { title: 'Provisioning', input: Nothing, state: Nothing },
  /** C1-C6: copies files and/or database tables from the source install into the operation's install. */
  copy_install: {
    title: 'Copy',
    input: Type.Object({
      source_install_id: Type.String({ format: 'uuid' }),
      include_files: Type.Boolean(),
      include_db: Type.Boolean(),
      /** C3: null is the whole database. */
      db_tables: Type.Union([Type.Array(Type.String({ maxLength: 64 }), { maxItems: 500 }), Type.Null()]),
      notification_emails: Emails,
    }),
    state: Nothing,
  },
  /** B1-B3. */
  create_backup: { title: 'Backup', input: Type.Object({ notification_emails: Emails }), state: Nothing },
  /** R1-R3: the checkpoint backup (when asked), then the restore. */
  restore_backup: {
    title: 'Restore',
    input: Type.Object({
      notification_emails: Emails,
      restore_database: Type.Boolean(),
      create_checkpoint: Type.Boolean(),
    }),
    /** R2: the checkpoint backup, once its row exists. */
    state: Type.Object({ checkpoint_backup_id: Type.Optional(Type.String({ format: 'uuid' })) }),
  },
  /** M7-M8: measures the install's disk usage. */
  refresh_disk_usage: { title: 'Disk usage refresh', input: Nothing, state: Nothing },
  purge_cache: {
    title: 'Cache purge',
    input: Type.Object({
      type: Type.Union([Type.Literal('object'), Type.Literal('page'), Type.Literal('cdn')]),
    }),
    state: Nothing,
  },
  /** Issue 13, createDomainCertificateOrder: the driver issues a certificate for one domain. */
  order_certificate: {
    title: 'Certificate order',
    input: Type.Object({
      domain_name: Type.String({ maxLength: 253 }),
      notification_emails: Emails,
      /** The reference's CertificateOrder, as sent. */
      holder: Type.Object({
        email_address: Type.String(),
        given_name: Type.String(),
        family_name: Type.String(),
        region_code: Type.String(),
        state: Type.Optional(Type.String()),
        city: Type.Optional(Type.String()),
        phone: Type.Optional(Type.String()),
      }),
    }),
    state: Nothing,
  },
  /**
   * Issue 21: the install's domains, redirects and certificates applied to the web server (the whole
   * current state, so queued changes are applied by one step). Started by the change, not requested.
   */
  apply_routing: { title: 'Routing', input: Nothing, state: Nothing },
  /** T9-T11: moves a site to another account (site-level: the operation has no install). */
  transfer_site: {
    title: 'Site transfer',
    input: Type.Object({
      site_id: Type.String({ format: 'uuid' }),
      destination_account_id: Type.String({ format: 'uuid' }),
    }),
    state: Nothing,
  },
  /**
   * Issue 30: moves an install to another hosting server (admin): copy while the source serves, a
   * final sync, the switch (placement generation + 1), the source cleaned. Rolls back before the switch.
   */
  move_install: {
    title: 'Move to another server',
    input: Type.Object({
      target_server_id: Type.String({ format: 'uuid' }),
      /** The drain that started it (GET /admin/v1/servers/{id} counts its moves), or null. */
      drain_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    }),
    state: Type.Object({
      phase: Type.Optional(
        Type.Union([
          Type.Literal('copying'),
          Type.Literal('syncing'),
          Type.Literal('verifying'),
          Type.Literal('switched'),
          Type.Literal('rolling_back'),
        ]),
      ),
      source_server_id: Type.Optional(Type.String({ format: 'uuid' })),
      source_generation: Type.Optional(Type.Integer({ minimum: 1 })),
      target_generation: Type.Optional(Type.Integer({ minimum: 1 })),
      /** POST /admin/v1/installs/{id}/move/cancel asked for a rollback (honoured before the switch). */
      cancel: Type.Optional(Type.Boolean()),
      /** The final sync froze the source's writes (a rollback opens them again; decision #211). */
      froze: Type.Optional(Type.Boolean()),
      /**
       * Decision #241: until when the source passes the install's requests to the target after the
       * switch (FLEET_MOVE_FORWARD_SECONDS after it); absent: it is cleaned at once.
       */
      forward_until: Type.Optional(Type.String({ format: 'date-time' })),
      /** Why the move rolls back (a cancel, or the failure). */
      rollback_reason: Type.Optional(Type.String({ maxLength: 2000 })),
    }),
  },
} as const satisfies Record<string, { title: string; input: TObject; state: TObject }>;

/**
 * Issue 21: what a finished operation gives its caller (the `result` column): provisioning's WordPress
 * administrator. Its password is not in it: it is the operation's sealed secret, shown once.
 */
export const RESULT = Type.Object({
  wordpress_admin: Type.Optional(
    Type.Object({ username: Type.String({ maxLength: 60 }), login_url: Type.String({ maxLength: 2048 }) }),
  ),
});
export type OperationResult = Static<typeof RESULT>;
const resultCheck = Compile(RESULT);

/** The operation's result, checked (null: none, or not a result: never handed on unchecked). */
export function resultOf(op: { id: string; result: unknown }): OperationResult | null {
  if (op.result === null || op.result === undefined) return null;
  if (!resultCheck.Check(op.result)) throw new Error(`operation ${op.id}: its result is not a result`);
  return op.result as OperationResult;
}

export type OperationType = keyof typeof OPERATIONS;
export const OPERATION_TYPES = Object.keys(OPERATIONS) as OperationType[];
export type OperationInput<T extends OperationType> = Static<(typeof OPERATIONS)[T]['input']>;
export type OperationState<T extends OperationType> = Static<(typeof OPERATIONS)[T]['state']>;

export const isOperationType = (type: string): type is OperationType => Object.hasOwn(OPERATIONS, type);

type Checks = Record<OperationType, { input: ReturnType<typeof Compile>; state: ReturnType<typeof Compile> }>;
const checks = Object.fromEntries(
  Object.entries(OPERATIONS).map(([type, shape]) => [
    type,
    { input: Compile(shape.input as TObject), state: Compile(shape.state as TObject) },
  ]),
) as Checks;

/** What an operation row carries (OperationRow, or any projection with these columns). */
interface Stored {
  id: string;
  type: string;
  input: unknown;
  state: unknown;
}

function checked<T extends OperationType>(op: Stored, type: T, part: 'input' | 'state'): unknown {
  if (op.type !== type) throw new Error(`operation ${op.id} is a ${op.type}, not a ${type}`);
  const value = op[part] ?? {};
  if (!checks[type][part].Check(value))
    throw new Error(`operation ${op.id}: its ${part} is not a ${type} ${part}`);
  return value;
}

/** The operation's input, checked against its type's shape (throws on another type or a bad shape). */
export const inputOf = <T extends OperationType>(op: Stored, type: T) =>
  checked(op, type, 'input') as OperationInput<T>;

/** The operation's state, checked against its type's shape. */
export const stateOf = <T extends OperationType>(op: Stored, type: T) =>
  checked(op, type, 'state') as OperationState<T>;

/** Checks a new input or state before it is written (a caller that built it untyped). */
export function assertShape(type: OperationType, part: 'input' | 'state', value: unknown) {
  if (!checks[type][part].Check(value)) throw new Error(`not a ${type} ${part}: ${JSON.stringify(value)}`);
}

/** C6, B3, R3: who is mailed when the operation ends (types without the field: nobody). */
export function notificationEmailsOf(op: Stored): string[] {
  if (!isOperationType(op.type)) return [];
  const input: OperationInput<OperationType> = inputOf(op, op.type);
  return 'notification_emails' in input ? input.notification_emails : [];
}
