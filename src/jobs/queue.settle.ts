import type { Db } from '../db/client.js';
import { withTransaction } from '../db/transaction.js';
import * as bossRepo from './boss.repo.js';
import * as leases from './leases.repo.js';
import { transactionAdapter } from './queue.adapters.js';
import type { QueueContext } from './queue.context.js';

export interface FailOptions {
  /** Only while this worker still holds the job's claim. */
  workerId?: string;
}

/**
 * Fails attempts inside `tx` (pg-boss's own fail: retry, or failed + dead letter); `now` moves a
 * retry's start to now instead of after the back-off, and wakes idle workers on commit.
 */
export async function failInTransaction(
  { boss }: QueueContext,
  tx: Db,
  name: string,
  ids: string[],
  message: string,
  now: boolean,
) {
  const instance = boss();
  for (const id of ids) await instance.fail(name, id, { message }, { db: transactionAdapter(tx) });
  if (!now) return;
  await bossRepo.retryNow(tx, name, ids);
  await bossRepo.wake(tx, name);
}

/** Gives attempts back inside `tx` without spending a retry (boss.repo.ts `putBack`); wakes workers. */
export async function putBackInTransaction(
  { boss }: QueueContext,
  tx: Db,
  name: string,
  ids: string[],
  message: string,
) {
  boss();
  await bossRepo.putBack(tx, name, ids, message);
  await bossRepo.wake(tx, name);
}

/** The end of an attempt: completed, failed (a retry spent) or released (none spent). */
export function settling(ctx: QueueContext) {
  const { database, boss: started } = ctx;
  return {
    /**
     * Completes a job. With `workerId`, only while that worker still holds its claim: false when the
     * job was reaped (the lease lapsed) and handed to another worker, whose attempt must not be ended.
     */
    async complete(name: string, id: string, workerId?: string): Promise<boolean> {
      const boss = started();
      if (!workerId) {
        await boss.complete(name, id);
        return true;
      }
      return withTransaction(database.db, async (tx) => {
        if (!(await leases.release(tx, id, workerId))) return false;
        // pg-boss 10 reads the third argument as the job's output, the fourth as the options.
        await boss.complete(name, id, undefined as never, { db: transactionAdapter(tx) });
        return true;
      });
    },

    /**
     * Fails one attempt: pg-boss retries it with back-off, or moves it to its dead-letter queue.
     * With `workerId`, only while that worker still holds its claim (false otherwise, as for `complete`).
     */
    async fail(name: string, id: string, error: unknown, options: FailOptions = {}): Promise<boolean> {
      const boss = started();
      const message = error instanceof Error ? error.message : String(error);
      const { workerId } = options;
      if (!workerId) {
        await boss.fail(name, id, { message });
        return true;
      }
      return withTransaction(database.db, async (tx) => {
        if (!(await leases.release(tx, id, workerId))) return false;
        await failInTransaction(ctx, tx, name, [id], message, false);
        return true;
      });
    },

    /**
     * Gives a job back untried (a graceful shutdown released it: not the work's fault): it is retried
     * at once and its retry count stays as it was, so shutdowns never use up a job's retries (issue 20
     * defect 3). With `workerId`, only while that worker still holds its claim (false otherwise).
     */
    async release(name: string, id: string, reason: string, options: FailOptions = {}): Promise<boolean> {
      const { workerId } = options;
      return withTransaction(database.db, async (tx) => {
        if (workerId && !(await leases.release(tx, id, workerId))) return false;
        await putBackInTransaction(ctx, tx, name, [id], reason);
        return true;
      });
    },
  };
}
