import { and, count, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { simulatedCa, simulatedFaults, simulatedInstalls, simulatedTasks } from '../../db/schema.js';

export interface SimulatedState {
  wp_version: string | null;
  file_bytes: number;
  db_tables: Record<string, number>;
}

export async function findState(tx: Db, installId: string): Promise<SimulatedState | null> {
  const [row] = await tx
    .select({
      wp_version: simulatedInstalls.wp_version,
      file_bytes: simulatedInstalls.file_bytes,
      db_tables: simulatedInstalls.db_tables,
    })
    .from(simulatedInstalls)
    .where(eq(simulatedInstalls.install_id, installId))
    .for('update');
  return row ?? null;
}

export async function saveState(tx: Db, installId: string, state: SimulatedState, now: Date) {
  await tx
    .insert(simulatedInstalls)
    .values({ install_id: installId, ...state, updated_at: now })
    .onConflictDoUpdate({ target: simulatedInstalls.install_id, set: { ...state, updated_at: now } });
}

export interface TaskRow {
  ready_at: Date;
  applied_at: Date | null;
  result: unknown;
}

const taskProjection = {
  ready_at: simulatedTasks.ready_at,
  applied_at: simulatedTasks.applied_at,
  result: simulatedTasks.result,
};

/** The task of an idempotency key, made on first sight with the given ready time. */
export async function ensureTask(
  db: Db,
  values: { key: string; operation: string; install_id: string | null; ready_at: Date; created_at: Date },
): Promise<TaskRow> {
  await db.insert(simulatedTasks).values(values).onConflictDoNothing();
  const [row] = await db
    .select(taskProjection)
    .from(simulatedTasks)
    .where(eq(simulatedTasks.key, values.key));
  if (!row) throw new Error(`simulated task ${values.key} vanished`);
  return row;
}

export async function lockTask(tx: Db, key: string): Promise<TaskRow | null> {
  const [row] = await tx
    .select(taskProjection)
    .from(simulatedTasks)
    .where(eq(simulatedTasks.key, key))
    .for('update');
  return row ?? null;
}

export async function markApplied(tx: Db, key: string, result: unknown, now: Date) {
  await tx.update(simulatedTasks).set({ applied_at: now, result }).where(eq(simulatedTasks.key, key));
}

/** How many times an operation was applied to an install (tests prove "once" with it). */
export async function countApplied(db: Db, installId: string, operation: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(simulatedTasks)
    .where(
      and(
        eq(simulatedTasks.install_id, installId),
        eq(simulatedTasks.operation, operation),
        sql`${simulatedTasks.applied_at} is not null`,
      ),
    );
  return Number(row?.n ?? 0);
}

/** Takes one fault of `operation`, if any is left (atomic across processes). */
export async function takeFault(db: Db, operation: string): Promise<'fail' | 'hang' | null> {
  const rows = await db
    .update(simulatedFaults)
    .set({ remaining: sql`${simulatedFaults.remaining} - 1` })
    .where(and(eq(simulatedFaults.operation, operation), gt(simulatedFaults.remaining, 0)))
    .returning({ mode: simulatedFaults.mode });
  return (rows[0]?.mode as 'fail' | 'hang' | undefined) ?? null;
}

export async function setFault(
  db: Db,
  values: { operation: string; mode: string; remaining: number; created_at: Date },
) {
  await db
    .insert(simulatedFaults)
    .values(values)
    .onConflictDoUpdate({
      target: simulatedFaults.operation,
      set: { mode: values.mode, remaining: values.remaining, created_at: values.created_at },
    });
}

export function listFaults(db: Db) {
  return db
    .select({
      operation: simulatedFaults.operation,
      mode: simulatedFaults.mode,
      count: simulatedFaults.remaining,
    })
    .from(simulatedFaults)
    .where(gt(simulatedFaults.remaining, 0))
    .orderBy(simulatedFaults.operation);
}

/** The simulated certificate authority (one row; drivers/simulated/ca.ts). */
export async function findCa(db: Db, id: string) {
  const [row] = await db.select().from(simulatedCa).where(eq(simulatedCa.id, id));
  return row ?? null;
}

/** Stores the CA unless another worker stored one first (both then read the same row). */
export async function insertCa(db: Db, row: typeof simulatedCa.$inferInsert) {
  await db.insert(simulatedCa).values(row).onConflictDoNothing();
}

/** `hostplane reseal`: every sealed key of the simulated driver (its CA's, its issued certificates'). */
export async function sealedValues(tx: Db) {
  const cas = await tx.select({ id: simulatedCa.id, sealed: simulatedCa.key_sealed }).from(simulatedCa);
  const tasks = await tx
    .select({ key: simulatedTasks.key, result: simulatedTasks.result })
    .from(simulatedTasks)
    .where(sql`${simulatedTasks.result}->>'key_sealed' is not null`);
  return { cas, tasks };
}

export async function setCaKey(tx: Db, id: string, sealed: string) {
  await tx.update(simulatedCa).set({ key_sealed: sealed }).where(eq(simulatedCa.id, id));
}

export async function setTaskResult(tx: Db, key: string, result: unknown) {
  await tx.update(simulatedTasks).set({ result }).where(eq(simulatedTasks.key, key));
}
