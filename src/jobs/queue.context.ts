import type PgBoss from 'pg-boss';
import type { Database } from '../db/client.js';
import type { JobSpec } from './catalog.js';

/** What every part of the queue (jobs/queue.*.ts) shares: the database, the catalog, the started pg-boss. */
export interface QueueContext {
  database: Database;
  specs: Record<string, JobSpec>;
  /** The started pg-boss instance; throws before `start()` and after `stop()`. */
  boss(): PgBoss;
}
