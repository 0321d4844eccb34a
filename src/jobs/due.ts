import { asc, eq, inArray, lte, type SQL, sql } from 'drizzle-orm';
import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import { dueJobs } from '../db/schema.js';
import { withTransaction } from '../db/transaction.js';
import type { JobName, JobPayload } from './catalog.js';
import type { JobQueue } from './queue.js';

/**
 * Due work: a job that should run at `runAt` by the service's clock (which may be the manual clock).
 * The row is written in the caller's transaction; the sweeper enqueues it once due. Work waiting for
 * a time survives a crash as a row, and a clock move makes it due like the passing of real time.
 * One row per `key`; scheduling a key again keeps the earlier time.
 */
export async function scheduleAt<N extends JobName>(
  tx: Db,
  key: string,
  name: N,
  payload: JobPayload<N>,
  runAt: Date,
): Promise<void> {
  await tx
    .insert(dueJobs)
    .values({ key, name, payload, run_at: runAt })
    .onConflictDoUpdate({
      target: dueJobs.key,
      set: { run_at: sql`least(${dueJobs.run_at}, excluded.run_at)` },
    });
}

/** Moves the due row of `key` to `runAt`, earlier or later (an edited schedule), or creates it. */
export async function rescheduleAt<N extends JobName>(
  tx: Db,
  key: string,
  name: N,
  payload: JobPayload<N>,
  runAt: Date,
): Promise<void> {
  await tx
    .insert(dueJobs)
    .values({ key, name, payload, run_at: runAt })
    .onConflictDoUpdate({ target: dueJobs.key, set: { run_at: runAt, name, payload } });
}

/** Drops the due row of `key` (the work is no longer wanted: a deleted schedule). */
export async function cancelDue(tx: Db, key: string): Promise<void> {
  await tx.delete(dueJobs).where(eq(dueJobs.key, key));
}

const BATCH = 100;

/**
 * In `tx`: up to `limit` due rows matching `where` (locked; rows another sweeper holds are skipped)
 * sent to the queue and deleted, earliest first. Answers how many.
 */
async function sendDue(tx: Db, queue: Pick<JobQueue, 'enqueue'>, where: SQL, limit: number) {
  const rows = await tx
    .select({ id: dueJobs.id, name: dueJobs.name, payload: dueJobs.payload })
    .from(dueJobs)
    .where(where)
    .orderBy(asc(dueJobs.run_at))
    .limit(limit)
    .for('update', { skipLocked: true });
  for (const row of rows) await queue.enqueue(tx, row.name as JobName, row.payload as never);
  if (rows.length > 0)
    await tx.delete(dueJobs).where(
      inArray(
        dueJobs.id,
        rows.map((r) => r.id),
      ),
    );
  return rows.length;
}

/**
 * Moves due rows into the queue: each row is deleted and its job sent in one transaction, so a
 * crash in between loses nothing and sends nothing twice. Several sweepers may run at once
 * (SKIP LOCKED). Returns how many jobs it enqueued.
 */
export async function sweepDue(db: Db, queue: Pick<JobQueue, 'enqueue'>, clock: Clock): Promise<number> {
  let total = 0;
  for (;;) {
    const now = clock.now();
    const moved = await withTransaction(db, (tx) => sendDue(tx, queue, lte(dueJobs.run_at, now), BATCH));
    total += moved;
    if (moved < BATCH) return total;
  }
}

/**
 * Enqueues the due row of `key` now, whatever its time, as the sweeper does once it is due: the row
 * deleted and its job sent in the caller's transaction (issue 30, decision 229: what it waited for
 * has happened). A row a sweeper holds (SKIP LOCKED) or no row at all: nothing. True when enqueued.
 */
export async function sweepKey(tx: Db, queue: Pick<JobQueue, 'enqueue'>, key: string): Promise<boolean> {
  return (await sendDue(tx, queue, eq(dueJobs.key, key), 1)) > 0;
}

/** The earliest due time (diagnostics and the admin clock's answer). */
export async function nextDue(db: Db): Promise<Date | null> {
  const [row] = await db
    .select({ run_at: dueJobs.run_at })
    .from(dueJobs)
    .orderBy(asc(dueJobs.run_at))
    .limit(1);
  return row?.run_at ?? null;
}
