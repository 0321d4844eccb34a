import type PgBoss from 'pg-boss';
import type { JobsConfig } from '../config.js';
import type { Database } from '../db/client.js';
import { readyQueues } from './boss.repo.js';
import { JOBS, type JobSpec } from './catalog.js';
import { bossDbOf } from './queue.adapters.js';
import type { QueueContext } from './queue.context.js';
import { fetching } from './queue.fetch.js';
import { leasing } from './queue.leases.js';
import { listenForJobs } from './queue.listen.js';
import { exhaustedQueue } from './queue.names.js';
import { sending } from './queue.send.js';
import { serverQueues } from './queue.servers.js';
import { settling } from './queue.settle.js';
import { type StartOptions, startQueues } from './queue.start.js';

export type { FetchOptions, QueuedJob } from './queue.fetch.js';
export { BOSS_SCHEMA, exhaustedQueue, jobOfQueue, WAKE_CHANNEL } from './queue.names.js';
export { serverQueue } from './queue.servers.js';
export type { FailOptions } from './queue.settle.js';
export type { StartOptions } from './queue.start.js';

export interface JobQueueDeps {
  database: Database;
  jobs: JobsConfig;
  /** Where LISTEN connects on PostgreSQL (the pool's connections are for queries). */
  databaseUrl?: string;
  /** The job catalog; tests of the engine pass their own. Default jobs/catalog.ts. */
  specs?: Record<string, JobSpec>;
  onError?: (err: unknown) => void;
}

/**
 * The durable job queue (pg-boss 10) on PGlite or PostgreSQL. This file puts it together; each concern
 * has its own file beside it:
 * - queue.start.ts: what every start does (pg-boss's schema, the queues and their options);
 * - queue.send.ts: `enqueue`, in the caller's transaction;
 * - queue.fetch.ts: `fetch`, claimed under a worker's lease;
 * - queue.settle.ts: the end of an attempt (`complete`, `fail`, `release`);
 * - queue.leases.ts: the queue's side of worker leases (`register`, `heartbeat`, `reap`);
 * - queue.listen.ts: `listen`, the NOTIFY wake-ups;
 * - queue.adapters.ts: how pg-boss reaches PGlite, the pool or a transaction;
 * - queue.names.ts: the schema, the NOTIFY channel, dead-letter queue names;
 * - boss.repo.ts: the engine's own SQL on pg-boss's job table.
 */
export function createJobQueue({ database, jobs, databaseUrl, specs = JOBS, onError }: JobQueueDeps) {
  const db = bossDbOf(database);
  let boss: PgBoss | null = null;
  const ctx: QueueContext = {
    database,
    specs,
    boss() {
      if (!boss) throw new Error('the job queue is not started');
      return boss;
    },
  };

  return {
    /** Every queue name a worker serves: each job and its dead-letter queue. */
    queueNames(): string[] {
      return Object.keys(specs).flatMap((name) => [name, exhaustedQueue(name)]);
    },

    specOf(name: string): JobSpec | undefined {
      return specs[name];
    },

    /** Installs or upgrades pg-boss's schema and creates every queue (queue.start.ts). */
    async start(options: StartOptions = {}) {
      if (boss) return;
      boss = await startQueues({ database, db, jobs, specs, onError }, options);
    },

    async stop() {
      const instance = boss;
      boss = null;
      await instance?.stop({ graceful: false, close: false, wait: true });
    },

    ...sending(ctx),
    ...fetching(ctx),
    ...settling(ctx),
    ...leasing(ctx),
    ...serverQueues(ctx),

    /** The queues among `names` with a job ready to be fetched now (boss.repo.ts). */
    readyQueues: (names: string[]) => readyQueues(database.db, names),

    /** Runs pg-boss maintenance now: jobs active past their expiry are retried (a dead worker's). */
    async expireNow() {
      await ctx.boss().expire();
    },

    /** The state of one job (tests, diagnostics). */
    async jobState(name: string, id: string) {
      const job = await ctx.boss().getJobById(name, id, { includeArchive: true });
      return job ? { state: job.state, retryCount: job.retryCount } : null;
    },

    /** Calls `onWake(queueName)` when a job is committed anywhere (LISTEN). Returns the unsubscribe. */
    listen: (onWake: (name: string) => void): Promise<() => Promise<void>> =>
      listenForJobs(database, databaseUrl, onWake, onError),
  };
}

export type JobQueue = ReturnType<typeof createJobQueue>;
