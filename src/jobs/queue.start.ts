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

/**
 * What the queue does at every start: installs or upgrades pg-boss's schema, then creates every queue
 * of the catalog and its dead-letter queue and updates each queue's options (the catalog and JOB_*
 * settings may have changed since it was made). One process at a time on PostgreSQL, under an advisory
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
    for (const [name, spec] of Object.entries(specs)) {
      const dead = exhaustedQueue(name);
      await instance.createQueue(dead, { name: dead, policy: 'standard', retryLimit: 5, retryDelay: 5 });
      const opts = queueOptions(spec, jobs, dead);
      await instance.createQueue(name, { ...opts, name });
      // The catalog (and JOB_* settings) may have changed since the queue was made.
      await instance.updateQueue(name, { ...opts, name });
    }
    return instance;
  });
}
