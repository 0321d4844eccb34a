import { and, eq, inArray, lt, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { jobClaims, jobWorkers } from '../db/schema.js';

/** Registers (or re-registers after its lease was reaped) a worker process; its heartbeat starts now. */
export async function registerWorker(db: Db, worker: { id: string; host: string; pid: number }) {
  await db
    .insert(jobWorkers)
    .values(worker)
    .onConflictDoUpdate({ target: jobWorkers.id, set: { heartbeat_at: sql`now()` } });
}

/** Refreshes a worker's lease; false when the row is gone (a sweeper found it lapsed and reaped it). */
export async function heartbeat(db: Db, id: string): Promise<boolean> {
  const rows = await db
    .update(jobWorkers)
    .set({ heartbeat_at: sql`now()` })
    .where(eq(jobWorkers.id, id))
    .returning({ id: jobWorkers.id });
  return rows.length > 0;
}

/**
 * Records that `workerId` runs these jobs, in the transaction that fetched them. The foreign key makes
 * a reaped worker's fetch fail (and roll back) instead of taking jobs under a lease nobody renews.
 */
export async function claim(tx: Db, workerId: string, queue: string, jobIds: string[]) {
  if (jobIds.length === 0) return;
  await tx
    .insert(jobClaims)
    .values(jobIds.map((job_id) => ({ job_id, queue, worker_id: workerId })))
    .onConflictDoUpdate({
      target: jobClaims.job_id,
      set: { worker_id: workerId, queue, claimed_at: sql`now()` },
    });
}

/** Drops the claim if `workerId` still holds it; false when the job was reaped and handed on. */
export async function release(tx: Db, jobId: string, workerId: string): Promise<boolean> {
  const rows = await tx
    .delete(jobClaims)
    .where(and(eq(jobClaims.job_id, jobId), eq(jobClaims.worker_id, workerId)))
    .returning({ id: jobClaims.job_id });
  return rows.length > 0;
}

/**
 * Locks the workers whose heartbeat is older than `lapseSeconds` (by the database's clock), or the one
 * worker `id`. SKIP LOCKED: two sweepers never reap the same worker; a heartbeat racing the reap waits.
 */
export async function lockLapsed(tx: Db, target: { lapseSeconds: number } | { id: string }) {
  const where =
    'id' in target
      ? eq(jobWorkers.id, target.id)
      : lt(jobWorkers.heartbeat_at, sql`now() - make_interval(secs => ${target.lapseSeconds})`);
  const rows = await tx
    .select({ id: jobWorkers.id })
    .from(jobWorkers)
    .where(where)
    .limit(100)
    .for('update', { skipLocked: true });
  return rows.map((r) => r.id);
}

/** Deletes and answers the claims of these workers (the jobs to hand on). */
export async function takeClaims(tx: Db, workerIds: string[]) {
  if (workerIds.length === 0) return [];
  return tx
    .delete(jobClaims)
    .where(inArray(jobClaims.worker_id, workerIds))
    .returning({ job_id: jobClaims.job_id, queue: jobClaims.queue });
}

export async function deleteWorkers(tx: Db, ids: string[]) {
  if (ids.length === 0) return;
  await tx.delete(jobWorkers).where(inArray(jobWorkers.id, ids));
}
