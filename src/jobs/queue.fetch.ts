import { withTransaction } from '../db/transaction.js';
import * as leases from './leases.repo.js';
import { transactionAdapter } from './queue.adapters.js';
import type { QueueContext } from './queue.context.js';

/** A fetched job, with what a handler needs to know about its attempt. */
export interface QueuedJob {
  id: string;
  name: string;
  data: unknown;
  retryCount: number;
  retryLimit: number;
  expireInSeconds: number;
  output: unknown;
}

export interface FetchOptions {
  /** Take jobs whose retry back-off has not passed yet (tests' `runJobs()`). */
  ignoreStartAfter?: boolean;
  /** Claim the jobs under this worker's lease (worker processes; jobs/leases.ts). */
  workerId?: string;
}

/** Taking jobs: an attempt starts (pg-boss marks them active), claimed under a worker's lease. */
export function fetching({ database, boss: started }: QueueContext) {
  return {
    /**
     * Takes up to `batchSize` ready jobs of one queue (they become active). With `workerId` (worker
     * processes) the jobs are claimed under that worker's lease in the same transaction (jobs/leases.ts).
     */
    async fetch(name: string, batchSize: number, options: FetchOptions = {}) {
      const boss = started();
      const fetchOptions = {
        batchSize,
        includeMetadata: true as const,
        ignoreStartAfter: options.ignoreStartAfter ?? false,
      };
      const { workerId } = options;
      const rows = workerId
        ? await withTransaction(database.db, async (tx) => {
            const jobs = await boss.fetch<unknown>(name, { ...fetchOptions, db: transactionAdapter(tx) });
            await leases.claim(
              tx,
              workerId,
              name,
              jobs.map((j) => j.id),
            );
            return jobs;
          })
        : await boss.fetch<unknown>(name, fetchOptions);
      return rows.map(
        (job): QueuedJob => ({
          id: job.id,
          name: job.name,
          data: job.data,
          retryCount: job.retryCount,
          retryLimit: job.retryLimit,
          expireInSeconds: Number(job.expireInSeconds),
          output: job.output,
        }),
      );
    },
  };
}
