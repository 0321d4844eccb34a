import { and, desc, eq, gt, inArray, isNotNull, or, sql } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { operations } from '../../db/schema.js';

const projection = {
  id: operations.id,
  account_id: operations.account_id,
  install_id: operations.install_id,
  type: operations.type,
  status: operations.status,
  resource_type: operations.resource_type,
  resource_id: operations.resource_id,
  input: operations.input,
  state: operations.state,
  error: operations.error,
  result: operations.result,
  /** Issue 21: whether a secret of the result waits to be shown (the value itself is never projected). */
  has_secret: sql<boolean>`${operations.secret_sealed} is not null`,
  waiting_reason: operations.waiting_reason,
  expected_at: operations.expected_at,
  created_at: operations.created_at,
  started_at: operations.started_at,
  completed_at: operations.completed_at,
};
export type OperationRow = RowOf<typeof projection>;

export const OPEN_STATUSES = ['queued', 'in_progress'];

export async function insertOperation(tx: Db, values: typeof operations.$inferInsert): Promise<OperationRow> {
  const [row] = await tx.insert(operations).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

/**
 * Inserts unless an open operation already holds one of the partial unique keys (one pending disk
 * refresh, one restore per install); then answers null.
 */
export async function insertUnlessOpen(
  tx: Db,
  values: typeof operations.$inferInsert & { type: 'refresh_disk_usage' | 'restore_backup' },
): Promise<OperationRow | null> {
  // The conflict target must repeat the partial index's predicate literally (a parameter would not
  // let PostgreSQL infer the index); `type` is one of two fixed strings.
  const [row] = await tx
    .insert(operations)
    .values(values)
    .onConflictDoNothing({
      target: operations.install_id,
      where: sql`${operations.type} = ${sql.raw(`'${values.type}'`)} and ${operations.status} in ('queued', 'in_progress')`,
    })
    .returning(projection);
  return row ?? null;
}

export async function findOperation(db: Db, id: string): Promise<OperationRow | null> {
  const [row] = await db.select(projection).from(operations).where(eq(operations.id, id));
  return row ?? null;
}

export async function lockOperation(tx: Db, id: string): Promise<OperationRow | null> {
  const [row] = await tx.select(projection).from(operations).where(eq(operations.id, id)).for('update');
  return row ?? null;
}

export async function updateOperation(
  tx: Db,
  id: string,
  values: Partial<typeof operations.$inferInsert>,
): Promise<OperationRow> {
  const [row] = await tx.update(operations).set(values).where(eq(operations.id, id)).returning(projection);
  if (!row) throw new Error(`operation ${id} vanished`);
  return row;
}

export async function listForInstall(db: Db, installId: string, page: Page) {
  const where = eq(operations.install_id, installId);
  return selectPage(
    db.select(projection).from(operations).where(where).$dynamic(),
    db.$count(operations, where),
    [desc(operations.created_at), desc(operations.id)],
    page,
  );
}

/** Open operations that touch the install: on it, or (copies) reading from it. */
export function openTouching(tx: Db, installId: string): Promise<OperationRow[]> {
  return tx
    .select(projection)
    .from(operations)
    .where(
      and(
        inArray(operations.status, OPEN_STATUSES),
        or(
          eq(operations.install_id, installId),
          and(
            eq(operations.type, 'copy_install'),
            sql`${operations.input}->>'source_install_id' = ${installId}`,
          ),
        ),
      ),
    );
}

/**
 * The queued (not yet begun) operation of a type on an install, locked for the caller's transaction:
 * a step that begins it waits for the caller's commit, so it reads what the caller wrote.
 */
export async function queuedOfTypeForUpdate(tx: Db, installId: string, type: string) {
  const [row] = await tx
    .select(projection)
    .from(operations)
    .where(
      and(eq(operations.install_id, installId), eq(operations.type, type), eq(operations.status, 'queued')),
    )
    .orderBy(desc(operations.created_at))
    .limit(1)
    .for('update');
  return row ?? null;
}

/** The open operation of a type on an install (a pending disk refresh), if any. */
export async function openOfType(db: Db, installId: string, type: string): Promise<OperationRow | null> {
  const [row] = await db
    .select(projection)
    .from(operations)
    .where(
      and(
        eq(operations.install_id, installId),
        eq(operations.type, type),
        inArray(operations.status, OPEN_STATUSES),
      ),
    )
    .orderBy(desc(operations.created_at))
    .limit(1);
  return row ?? null;
}

/** The newest operation of a type on an install created after `since` whose input has `key: value`. */
export async function latestSince(
  tx: Db,
  installId: string,
  type: string,
  since: Date,
  match: { key: string; value: string },
): Promise<OperationRow | null> {
  const [row] = await tx
    .select(projection)
    .from(operations)
    .where(
      and(
        eq(operations.install_id, installId),
        eq(operations.type, type),
        gt(operations.created_at, since),
        sql`${operations.input}->>${match.key} = ${match.value}`,
      ),
    )
    .orderBy(desc(operations.created_at))
    .limit(1);
  return row ?? null;
}

/** When an operation of a type last completed on an install (storage_update_time). */
export async function lastCompleted(db: Db, installId: string, type: string): Promise<Date | null> {
  const [row] = await db
    .select({ at: operations.completed_at })
    .from(operations)
    .where(
      and(
        eq(operations.install_id, installId),
        eq(operations.type, type),
        eq(operations.status, 'completed'),
        isNotNull(operations.completed_at),
      ),
    )
    .orderBy(desc(operations.completed_at))
    .limit(1);
  return row?.at ?? null;
}

/**
 * Issue 21: the operation's sealed secret, taken: answered and erased in the caller's transaction
 * (the row locked, so two readers cannot both take it). Null when there is none (any more).
 */
export async function takeSecret(tx: Db, id: string): Promise<string | null> {
  const [row] = await tx
    .select({ sealed: operations.secret_sealed })
    .from(operations)
    .where(and(eq(operations.id, id), isNotNull(operations.secret_sealed)))
    .for('update');
  if (!row?.sealed) return null;
  await tx.update(operations).set({ secret_sealed: null }).where(eq(operations.id, id));
  return row.sealed;
}

/** `hostplane reseal`: every operation's sealed secret (those not shown yet). */
export function sealedSecrets(tx: Db) {
  return tx
    .select({ id: operations.id, sealed: operations.secret_sealed })
    .from(operations)
    .where(isNotNull(operations.secret_sealed));
}

export async function setSecret(tx: Db, id: string, sealed: string) {
  await tx.update(operations).set({ secret_sealed: sealed }).where(eq(operations.id, id));
}
