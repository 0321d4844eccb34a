import pg from 'pg';
import type { Database } from '../db/client.js';
import { WAKE_CHANNEL } from './queue.names.js';

/**
 * Calls `onWake(queueName)` when a job is committed anywhere (the NOTIFY of jobs/boss.repo.ts `wake`).
 * PGlite: its own listen. PostgreSQL: a dedicated connection to `databaseUrl` (none given: no wake-ups,
 * polling only). Answers the unsubscribe.
 */
export async function listenForJobs(
  database: Database,
  databaseUrl: string | undefined,
  onWake: (name: string) => void,
  onError?: (err: unknown) => void,
): Promise<() => Promise<void>> {
  if (database.pglite) return database.pglite.listen(WAKE_CHANNEL, onWake);
  if (!databaseUrl) return async () => {};
  return listenPostgres(databaseUrl, onWake, onError);
}

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
