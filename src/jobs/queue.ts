import type { PGlite } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import PgBoss from 'pg-boss';
import type { Static } from 'typebox';
import { Compile } from 'typebox/compile';
import type { JobsConfig } from '../config.js';
import type { Database, Db } from '../db/client.js';
import { JOBS, type JobName, type JobSpec } from './catalog.js';

/** pg-boss's own tables live in this schema, beside (not inside) the Drizzle migrations. */
export const BOSS_SCHEMA = 'pgboss';
/** NOTIFY channel: the payload is a queue name; sent inside the enqueueing transaction (delivered on commit). */
export const WAKE_CHANNEL = 'hostplane_jobs';
const EXHAUSTED = '-exhausted';
/** The dead-letter queue of a job: a job whose retries are exhausted lands here (jobs/worker.ts). */
export const exhaustedQueue = (name: string) => `${name}${EXHAUSTED}`;
/** The job a queue serves, and whether it is that job's dead-letter queue. */
export const jobOfQueue = (queue: string) =>
  queue.endsWith(EXHAUSTED)
    ? { name: queue.slice(0, -EXHAUSTED.length), exhausted: true }
    : { name: queue, exhausted: false };

export type JobPayload<N extends JobName> = Static<(typeof JOBS)[N]['payload']>;

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

type BossDb = { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };

/** pg-boss 10 over PGlite: multi-statement migrations and maintenance go through exec() (stack notes §2). */
function pgliteAdapter(pglite: PGlite): BossDb {
  return {
    async executeSql(text, values) {
      if (values?.length) return pglite.query(text, values);
      const results = await pglite.exec(text);
      return results.at(-1) ?? { rows: [] };
    },
  };
}

/** pg-boss 10 over our pool (no values: the simple protocol, so multi-statement text works). */
function poolAdapter(pool: pg.Pool): BossDb {
  return { executeSql: (text, values) => pool.query(text, values as unknown[]) };
}

/**
 * pg-boss 10 inside the caller's Drizzle transaction, so a job commits or rolls back with the row that
 * asked for it. On PGlite this is also what avoids a deadlock: the transaction holds PGlite's only
 * connection, and a send through pg-boss's own handle would wait for it forever. Drizzle drops
 * `undefined` params, so they become null.
 */
function transactionAdapter(tx: Db): BossDb {
  return {
    async executeSql(text, values = []) {
      const chunks: SQL[] = text
        .split(/\$(\d+)/)
        .map((part, i) => (i % 2 ? sql`${values[Number(part) - 1] ?? null}` : sql.raw(part)));
      const result = (await tx.execute(sql.join(chunks))) as unknown as { rows: unknown[] } | unknown[];
      return { rows: Array.isArray(result) ? result : result.rows };
    },
  };
}

export interface JobQueueDeps {
  database: Database;
  jobs: JobsConfig;
  /** Where LISTEN connects on PostgreSQL (the pool's connections are for queries). */
  databaseUrl?: string;
  /** The job catalog; tests of the engine pass their own. Default jobs/catalog.ts. */
  specs?: Record<string, JobSpec>;
  onError?: (err: unknown) => void;
}

export interface StartOptions {
  /** Expire the jobs of dead workers and archive old ones (worker processes); default false. */
  maintenance?: boolean;
}

/** Queue options as pg-boss stores them per queue; JOB_* settings override the catalog (tests, tuning). */
function queueOptions(spec: JobSpec, jobs: JobsConfig, deadLetter?: string): PgBoss.Queue {
  return {
    name: '',
    policy: spec.policy ?? 'standard',
    retryLimit: spec.retryLimit,
    retryDelay: jobs.retryDelaySeconds ?? spec.retryDelaySeconds,
    retryBackoff: spec.retryBackoff,
    expireInSeconds: jobs.expireSeconds ?? spec.expireInSeconds,
    ...(deadLetter && { deadLetter }),
  };
}

/** The durable job queue (pg-boss 10) on PGlite or PostgreSQL. */
export function createJobQueue({ database, jobs, databaseUrl, specs = JOBS, onError }: JobQueueDeps) {
  const db = database.pglite
    ? pgliteAdapter(database.pglite)
    : database.pool
      ? poolAdapter(database.pool)
      : null;
  if (!db) throw new Error('createJobQueue: database has neither pglite nor pool');
  let boss: PgBoss | null = null;
  const checks = new Map(Object.entries(specs).map(([name, spec]) => [name, Compile(spec.payload)]));

  function started(): PgBoss {
    if (!boss) throw new Error('the job queue is not started');
    return boss;
  }

  return {
    /** Every queue name a worker serves: each job and its dead-letter queue. */
    queueNames(): string[] {
      return Object.keys(specs).flatMap((name) => [name, exhaustedQueue(name)]);
    },

    specOf(name: string): JobSpec | undefined {
      return specs[name];
    },

    /** Installs or upgrades pg-boss's schema (under its advisory lock) and creates every queue. */
    async start(options: StartOptions = {}) {
      if (boss) return;
      const instance = new PgBoss({
        db,
        schema: BOSS_SCHEMA,
        migrate: true,
        schedule: false,
        supervise: options.maintenance ?? false,
        maintenanceIntervalSeconds: jobs.maintenanceSeconds,
      } as PgBoss.ConstructorOptions);
      instance.on('error', (err) => onError?.(err));
      await instance.start();
      for (const [name, spec] of Object.entries(specs)) {
        const dead = exhaustedQueue(name);
        await instance.createQueue(dead, { name: dead, policy: 'standard', retryLimit: 5, retryDelay: 5 });
        const opts = queueOptions(spec, jobs, dead);
        await instance.createQueue(name, { ...opts, name });
        // The catalog (and JOB_* settings) may have changed since the queue was made.
        await instance.updateQueue(name, { ...opts, name });
      }
      boss = instance;
    },

    async stop() {
      const instance = boss;
      boss = null;
      await instance?.stop({ graceful: false, close: false, wait: true });
    },

    /**
     * Sends a job inside the caller's transaction (style rule 5): it exists exactly when the
     * transaction commits. A NOTIFY in the same transaction wakes idle workers on commit.
     */
    async enqueue<N extends JobName>(tx: Db, name: N, payload: JobPayload<N>): Promise<string | null> {
      const spec = specs[name];
      if (!spec) throw new Error(`unknown job ${name}`);
      if (!checks.get(name)?.Check(payload)) throw new Error(`invalid payload for job ${name}`);
      const singletonKey = spec.singletonKey?.(payload as never);
      const id = await started().send(name, payload as object, {
        db: transactionAdapter(tx),
        ...(singletonKey && { singletonKey }),
      });
      // A null id without a singleton key means the queue does not exist: never drop work silently.
      if (!id && !singletonKey) throw new Error(`job ${name} was not enqueued (is its queue created?)`);
      await tx.execute(sql`select pg_notify(${WAKE_CHANNEL}, ${name})`);
      return id;
    },

    /** Takes up to `batchSize` ready jobs of one queue (they become active). */
    async fetch(name: string, batchSize: number, options: { ignoreStartAfter?: boolean } = {}) {
      const rows = await started().fetch<unknown>(name, {
        batchSize,
        includeMetadata: true,
        ignoreStartAfter: options.ignoreStartAfter ?? false,
      });
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

    async complete(name: string, id: string) {
      await started().complete(name, id);
    },

    /** Fails one attempt: pg-boss retries it with back-off, or moves it to its dead-letter queue. */
    async fail(name: string, id: string, error: unknown) {
      const message = error instanceof Error ? error.message : String(error);
      await started().fail(name, id, { message });
    },

    /** Runs pg-boss maintenance now: jobs active past their expiry are retried (a dead worker's). */
    async expireNow() {
      await started().expire();
    },

    /** The state of one job (tests, diagnostics). */
    async jobState(name: string, id: string) {
      const job = await started().getJobById(name, id, { includeArchive: true });
      return job ? { state: job.state, retryCount: job.retryCount } : null;
    },

    /** Calls `onWake(queueName)` when a job is committed anywhere (LISTEN). Returns the unsubscribe. */
    async listen(onWake: (name: string) => void): Promise<() => Promise<void>> {
      if (database.pglite) return database.pglite.listen(WAKE_CHANNEL, onWake);
      if (!databaseUrl) return async () => {};
      return listenPostgres(databaseUrl, onWake, onError);
    },
  };
}

/** LISTEN on a dedicated connection that reconnects by itself; polling covers the gaps. */
async function listenPostgres(
  url: string,
  onWake: (name: string) => void,
  onError?: (err: unknown) => void,
): Promise<() => Promise<void>> {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: url });
    next.on('notification', (msg) => {
      if (msg.channel === WAKE_CHANNEL && msg.payload) onWake(msg.payload);
    });
    next.on('error', (err) => {
      onError?.(err);
      void next.end().catch(() => {});
      if (client === next) client = null;
      if (!closed) retry = setTimeout(() => void connect(), 1000);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${WAKE_CHANNEL}`);
      client = next;
      if (closed) await next.end();
    } catch (err) {
      onError?.(err);
      await next.end().catch(() => {});
      if (!closed) retry = setTimeout(() => void connect(), 1000);
    }
  };
  await connect();
  return async () => {
    closed = true;
    clearTimeout(retry);
    await client?.end().catch(() => {});
  };
}

export type JobQueue = ReturnType<typeof createJobQueue>;
