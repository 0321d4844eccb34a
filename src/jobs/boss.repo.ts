import { sql } from 'drizzle-orm';
import { type Db, queryRows } from '../db/client.js';
import { BOSS_SCHEMA, WAKE_CHANNEL } from './queue.names.js';

/**
 * The job engine's own statements on pg-boss's job table, for what pg-boss 10 has no call for. Everything
 * else (send, fetch, complete, fail, expire) goes through pg-boss itself (jobs/queue.*.ts).
 */
const job = sql.raw(`${BOSS_SCHEMA}.job`);
/** Drizzle spreads a JS array into a list: the ids go as one array literal. */
/** A PostgreSQL array literal of quoted elements (no element holds a quote or backslash: ids, queue names). */
const arrayLiteral = (items: string[]) => `{${items.map((i) => `"${i}"`).join(',')}}`;
const uuids = (ids: string[]) => sql`${arrayLiteral(ids)}::uuid[]`;

/** Moves the start of these jobs' pending retries to now (instead of after their back-off). */
export async function retryNow(tx: Db, name: string, ids: string[]) {
  await tx.execute(
    sql`update ${job} set start_after = now() where name = ${name} and id = any(${uuids(ids)}) and state = 'retry'`,
  );
}

/**
 * Gives active jobs back untried (issue 20 defect 3): a graceful shutdown released them, which is not
 * the work's fault, so no retry is spent. pg-boss counts a retry when it fetches a job that has
 * started before (`retry_count + 1` where `started_on` is set) and fails a job for good once
 * `retry_count` reaches its limit; clearing `started_on` makes the next fetch the same attempt again.
 * State `retry` rather than `created`: a `short` queue allows one `created` job per key, and a send
 * may have queued one while this job ran. Answers the ids put back (only jobs still active).
 */
export async function putBack(tx: Db, name: string, ids: string[], message: string): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(
    tx,
    sql`update ${job} set state = 'retry', start_after = now(), started_on = null,
          output = ${JSON.stringify({ message })}::jsonb
        where name = ${name} and id = any(${uuids(ids)}) and state = 'active'
        returning id`,
  );
  return rows.map((r) => r.id);
}

/** Issue 30: the active jobs of one queue (a server's, whose agent restarted). */
export async function activeIds(tx: Db, name: string): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(
    tx,
    sql`select id from ${job} where name = ${name} and state = 'active'`,
  );
  return rows.map((r) => r.id);
}

/** Wakes idle workers of a queue when the transaction commits (LISTEN, jobs/queue.listen.ts). */
export async function wake(tx: Db, name: string) {
  await tx.execute(sql`select pg_notify(${WAKE_CHANNEL}, ${name})`);
}

/**
 * The queues among `names` that have a job a fetch would take now (pg-boss's own condition: not yet
 * active, its start passed): one statement for every queue, where each idle worker loop used to ask
 * its own queue at every poll (about 40 fetches a poll interval, the idle process's CPU).
 */
export async function readyQueues(db: Db, names: string[]): Promise<string[]> {
  if (names.length === 0) return [];
  const rows = await queryRows<{ name: string }>(
    db,
    sql`select distinct name from ${job}
        where name = any(${arrayLiteral(names)}::text[])
          and state < 'active' and start_after < now()`,
  );
  return rows.map((r) => r.name);
}
