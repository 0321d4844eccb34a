import PgBoss from 'pg-boss';
import type { JobsConfig } from '../config.js';
import { type Database, withAdvisoryLock } from '../db/client.js';
import type { JobSpec } from './catalog.js';
import type { BossDb } from './queue.adapters.js';
import { BOSS_SCHEMA, exhaustedQueue } from './queue.names.js';

export interface StartOptions {
  /** Expire the jobs of dead workers and archive old ones (worker processes); default false. */
  maintenance?: boolean;
}

export interface StartDeps {
  database: Database;
  /** pg-boss's own handle on the database (queue.adapters.ts). */
  db: BossDb;
  jobs: JobsConfig;
  specs: Record<string, JobSpec>;
  onError?: (err: unknown) => void;
}

/** Arbitrary constant key of the advisory lock that serialises pg-boss's install across processes. */
const QUEUE_LOCK_KEY = 727_274_002;

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

/**
 * What the queue does at every start: installs or upgrades pg-boss's schema, then makes every queue
 * of the catalog and its dead-letter queue exist with the options they should have (ensureQueues). One process at a time on PostgreSQL, under an advisory
 * lock: processes creating the queues at once deadlocked (cli.test.ts, three migrates). Answers the
 * started pg-boss instance.
 */
export async function startQueues(deps: StartDeps, options: StartOptions = {}): Promise<PgBoss> {
  const { database, db, jobs, specs, onError } = deps;
  return withAdvisoryLock(database, QUEUE_LOCK_KEY, async () => {
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
    return instance;
  });
}
