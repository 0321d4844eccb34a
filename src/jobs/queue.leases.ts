import { withTransaction } from '../db/transaction.js';
import * as leases from './leases.repo.js';
import type { QueueContext } from './queue.context.js';
import { failInTransaction, putBackInTransaction } from './queue.settle.js';

/** The queue's side of worker leases (jobs/leases.ts): register, heartbeat, reap. */
export function leasing(ctx: QueueContext) {
  const { database, boss: started } = ctx;
  return {
    /** Registers a worker process's lease (again, after it was reaped); its heartbeat starts now. */
    async register(worker: { id: string; host: string; pid: number }) {
      await leases.registerWorker(database.db, worker);
    },

    /** Refreshes a worker's lease; false when it was reaped (its jobs were handed on). */
    heartbeat: (workerId: string) => leases.heartbeat(database.db, workerId),

    /**
     * Reaps dead workers: those whose heartbeat is older than `lapseSeconds` (or the one worker `id`,
     * when it retires). A dead worker's claimed jobs fail and are retried at once (or go to their
     * dead-letter queue when their retries are used up): a crash counts as an attempt, since the
     * work itself may be what kills workers. A retiring worker (a graceful shutdown) gives the jobs
     * it still holds back without spending a retry. Idle workers are woken, and the lease rows go.
     * Safe when several sweepers race (SKIP LOCKED). Answers how many jobs were handed on.
     */
    async reap(target: { lapseSeconds: number } | { id: string }): Promise<number> {
      started();
      return withTransaction(database.db, async (tx) => {
        const dead = await leases.lockLapsed(tx, target);
        if (dead.length === 0) return 0;
        const claims = await leases.takeClaims(tx, dead);
        const queues = new Set(claims.map((c) => c.queue));
        for (const name of queues) {
          const ids = claims.filter((c) => c.queue === name).map((c) => c.job_id);
          if ('id' in target) await putBackInTransaction(ctx, tx, name, ids, 'its worker shut down; retried');
          else
            await failInTransaction(
              ctx,
              tx,
              name,
              ids,
              'its worker stopped (the lease lapsed); retried',
              true,
            );
        }
        await leases.deleteWorkers(tx, dead);
        return claims.length;
      });
    },
  };
}
