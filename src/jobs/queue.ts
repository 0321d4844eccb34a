import type { PGlite } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import PgBoss from 'pg-boss';
import { Compile } from 'typebox/compile';
import type { JobsConfig } from '../config.js';
import { type Database, type Db, withAdvisoryLock } from '../db/client.js';
import { withTransaction } from '../db/transaction.js';
import { JOBS, type JobName, type JobPayload, type JobSpec } from './catalog.js';
import * as leases from './leases.repo.js';

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
 * `undefined` params, so they become null; an array stays one parameter (`$2::uuid[]`), where
 * Drizzle would otherwise spread it into a list.
 */
function param(value: unknown): SQL {
  return Array.isArray(value) ? sql`${sql.param(value)}` : sql`${value ?? null}`;
}

function transactionAdapter(tx: Db): BossDb {
  return {
    async executeSql(text, values = []) {
      const chunks: SQL[] = text
        .split(/\$(\d+)/)
        .map((part, i) => (i % 2 ? param(values[Number(part) - 1]) : sql.raw(part)));
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

export interface FetchOptions {
  /** Take jobs whose retry back-off has not passed yet (tests' `runJobs()`). */
  ignoreStartAfter?: boolean;
  /** Claim the jobs under this worker's lease (worker processes; jobs/leases.ts). */
  workerId?: string;
}

export interface FailOptions {
  /** Only while this worker still holds the job's claim. */
  workerId?: string;
  /** Retry at once, without the back-off (a released job: the attempt was not the job's fault). */
  retryNow?: boolean;
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

/** The stored options `queueOptions` sets, as pg-boss's `getQueues` answers them. */
const COMPARED = [
  'policy',
  'retryLimit',
  'retryDelay',
  'retryBackoff',
  'expireInSeconds',
  'deadLetter',
] as const;

/**
 * Creates each missing queue (and its dead-letter queue) and updates a queue only where its stored
 * options differ from the catalog and JOB_* settings (they may have changed since it was made).
 * Issue 20: one read of pg-boss's queue table when nothing changed, instead of 72 statements (three
 * per job) at every start. A field the catalog leaves unset is not compared (pg-boss keeps it too).
 */
async function ensureQueues(instance: PgBoss, specs: Record<string, JobSpec>, jobs: JobsConfig) {
  const stored = new Map((await instance.getQueues()).map((q) => [q.name, q]));
  for (const [name, spec] of Object.entries(specs)) {
    const dead = exhaustedQueue(name);
    if (!stored.has(dead))
      await instance.createQueue(dead, { name: dead, policy: 'standard', retryLimit: 5, retryDelay: 5 });
    const opts = { ...queueOptions(spec, jobs, dead), name };
    const current = stored.get(name);
    if (!current) await instance.createQueue(name, opts);
    else if (COMPARED.some((key) => opts[key] !== undefined && opts[key] !== current[key]))
      await instance.updateQueue(name, opts);
  }
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

  /**
   * Fails attempts inside `tx` (pg-boss's own fail: retry, or failed + dead letter); `now` moves a
   * retry's start to now instead of after the back-off, and wakes idle workers on commit.
   */
  async function failInTransaction(tx: Db, name: string, ids: string[], message: string, now: boolean) {
    const boss = started();
    for (const id of ids) await boss.fail(name, id, { message }, { db: transactionAdapter(tx) });
    if (!now) return;
    await tx.execute(
      sql`update ${sql.raw(BOSS_SCHEMA)}.job set start_after = now()
          where name = ${name} and id = any(${`{${ids.join(',')}}`}::uuid[]) and state = 'retry'`,
    );
    await tx.execute(sql`select pg_notify(${WAKE_CHANNEL}, ${name})`);
  }

  async function startBoss(options: StartOptions) {
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
    await ensureQueues(instance, specs, jobs);
    boss = instance;
  }

  return {
    /** Every queue name a worker serves: each job and its dead-letter queue. */
    queueNames(): string[] {
      return Object.keys(specs).flatMap((name) => [name, exhaustedQueue(name)]);
    },

    specOf(name: string): JobSpec | undefined {
      return specs[name];
    },

    /**
     * Installs or upgrades pg-boss's schema and creates every queue, one process at a time on
     * PostgreSQL (processes creating the queues at once deadlocked: cli.test.ts, three migrates).
     */
    async start(options: StartOptions = {}) {
      if (boss) return;
      await withAdvisoryLock(database, QUEUE_LOCK_KEY, () => startBoss(options));
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
     * `retryNow` (a released job, not a failed one) starts the retry at once. With `workerId`, only
     * while that worker still holds its claim (false otherwise, as for `complete`).
     */
    async fail(name: string, id: string, error: unknown, options: FailOptions = {}): Promise<boolean> {
      const boss = started();
      const message = error instanceof Error ? error.message : String(error);
      const { workerId } = options;
      if (!workerId && !options.retryNow) {
        await boss.fail(name, id, { message });
        return true;
      }
      return withTransaction(database.db, async (tx) => {
        if (workerId && !(await leases.release(tx, id, workerId))) return false;
        await failInTransaction(tx, name, [id], message, options.retryNow ?? false);
        return true;
      });
    },

    /** Registers a worker process's lease (again, after it was reaped); its heartbeat starts now. */
    async register(worker: { id: string; host: string; pid: number }) {
      await leases.registerWorker(database.db, worker);
    },

    /** Refreshes a worker's lease; false when it was reaped (its jobs were handed on). */
    heartbeat: (workerId: string) => leases.heartbeat(database.db, workerId),

    /**
     * Reaps dead workers: those whose heartbeat is older than `lapseSeconds` (or the one worker `id`,
     * when it retires). Their claimed jobs fail and are retried at once (or go to their dead-letter
     * queue when their retries are used up), idle workers are woken, and the lease rows go. Safe
     * when several sweepers race (SKIP LOCKED). Answers how many jobs were handed on.
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
          await failInTransaction(tx, name, ids, 'its worker stopped (the lease lapsed); retried', true);
        }
        await leases.deleteWorkers(tx, dead);
        return claims.length;
      });
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

/** Arbitrary constant key of the advisory lock that serialises pg-boss's install across processes. */
const QUEUE_LOCK_KEY = 727_274_002;

/**
 * LISTEN on a dedicated connection that reconnects by itself (backing off from 0.5 s to 5 s while the
 * database is away); polling covers the gaps. A connection lost mid-way or never made is reported
 * to `onError` and retried; nothing here can throw out of the process.
 */
async function listenPostgres(
  url: string,
  onWake: (name: string) => void,
  onError?: (err: unknown) => void,
): Promise<() => Promise<void>> {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let failures = 0;
  const schedule = () => {
    if (closed || retry) return;
    const delay = Math.min(5000, 500 * 2 ** failures++);
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, delay);
  };
  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: url, keepAlive: true, connectionTimeoutMillis: 5000 });
    let dropped = false;
    // The 'error' event and a rejected connect() may both report one failure: it is handled once.
    const drop = (err: unknown) => {
      if (dropped) return;
      dropped = true;
      onError?.(err);
      if (client === next) client = null;
      void next.end().catch(() => {});
      schedule();
    };
    next.on('notification', (msg) => {
      if (msg.channel === WAKE_CHANNEL && msg.payload) onWake(msg.payload);
    });
    next.on('error', drop);
    try {
      await next.connect();
      await next.query(`LISTEN ${WAKE_CHANNEL}`);
      if (dropped) return;
      failures = 0;
      client = next;
      if (closed) await next.end();
    } catch (err) {
      drop(err);
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
