import path from 'node:path';
import { sql } from 'drizzle-orm';
import { type Db, queryRows } from '../../src/db/client.js';
import type { Json } from './harness.js';
import { type Running, runCli } from './process.js';

/**
 * Several Hostplane processes (`hostplane api`, `hostplane worker`) on one PostgreSQL database: the
 * reliability suite and the multi-process test (issue 15, G10) drive them over real sockets.
 */

/** Polls `check` every `everyMs` until it answers truthy; errors count as "not yet". */
export async function until<T>(
  what: string,
  check: () => Promise<T>,
  ms = 30_000,
  everyMs = 100,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => null);
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const alive = (run: Running) => run.child.exitCode === null && run.child.signalCode === null;

export async function stop(run: Running | undefined, signal: NodeJS.Signals = 'SIGTERM') {
  if (!run) return null;
  if (alive(run)) run.child.kill(signal);
  return run.exited;
}

export interface HttpAnswer {
  status: number;
  body: Json;
  headers: Headers;
  ms: number;
}

export type HttpCall = (method: string, p: string, body?: unknown) => Promise<HttpAnswer>;

/** An HTTP client of a child process (real sockets, real timing); a network error is status 0. */
export function httpClient(base: string, authorization: string, timeoutMs = 30_000): HttpCall {
  return async (method, p, body) => {
    const started = Date.now();
    try {
      const res = await fetch(`${base}${p}`, {
        method,
        headers: { authorization, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      let json: Json = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch {
        json = text;
      }
      return { status: res.status, body: json, headers: res.headers, ms: Date.now() - started };
    } catch (err) {
      return { status: 0, body: String(err), headers: new Headers(), ms: Date.now() - started };
    }
  };
}

/** The operation id a 202 points at (its Location header). */
export const operationIdOf = (res: HttpAnswer) =>
  new URL(String(res.headers.get('location'))).pathname.split('/').pop() ?? '';

export interface ClusterOptions {
  databaseUrl: string;
  tmp: string;
  env: Record<string, string>;
}

/** Starts and replaces `hostplane api` and `hostplane worker` processes on one database. */
export function cluster({ databaseUrl, tmp, env }: ClusterOptions) {
  let n = 0;
  const base = { ...env, DATABASE_URL: databaseUrl };
  // Every process ever started, so that none outlives the test file (a failed start among several
  // started together would otherwise leave the others running, and the file would never end).
  const started: Running[] = [];
  const spawn = (args: string[], vars: Record<string, string>) => {
    const run = runCli(args, vars);
    started.push(run);
    return run;
  };
  return {
    /** Kills every process this cluster started that is still running, and waits for each to end. */
    async stopAll() {
      await Promise.all(started.map((run) => stop(run, 'SIGKILL')));
    },
    async worker(extra: Record<string, string> = {}) {
      const run = spawn(['worker'], { ...base, ...extra, DATA_DIR: path.join(tmp, `w${++n}`) });
      await run.waitFor(/Hostplane worker is running \d+ job queues on PostgreSQL/, 120_000);
      return run;
    },
    /** An API process; answers it and its origin (http://127.0.0.1:port). */
    async api(extra: Record<string, string> = {}) {
      const run = spawn(['api'], {
        ...base,
        ...extra,
        DATA_DIR: path.join(tmp, `a${++n}`),
        PORT: '0',
        HOST: '127.0.0.1',
      });
      const [, url] = await run.waitFor(/Hostplane is serving (\S+)\/v1 on PostgreSQL/, 120_000);
      return { run, origin: new URL(url ?? '').origin };
    },
  };
}

/** Applied simulated-driver calls by operation (the driver records each call once it applies). */
export async function appliedCalls(db: Db): Promise<Map<string, number>> {
  const rows = await queryRows<{ operation: string; n: string }>(
    db,
    sql`select operation, count(*)::text as n from simulated_tasks where applied_at is not null group by operation`,
  );
  return new Map(rows.map((r) => [r.operation, Number(r.n)]));
}

export async function operationStatus(db: Db, id: string): Promise<string | null> {
  const rows = await queryRows<{ status: string }>(db, sql`select status from operations where id = ${id}`);
  return rows[0]?.status ?? null;
}

/** The pid of the worker process holding the most job claims now (null when none holds one). */
export async function busiestWorkerPid(db: Db): Promise<number | null> {
  const rows = await queryRows<{ pid: number }>(
    db,
    sql`select w.pid from job_workers w join job_claims c on c.worker_id = w.id
        group by w.pid order by count(*) desc limit 1`,
  );
  return rows[0] ? Number(rows[0].pid) : null;
}

/** The pid of the worker process that holds the job of this operation now (null when none does). */
export async function workerPidOf(db: Db, operationId: string): Promise<number | null> {
  const rows = await queryRows<{ pid: number }>(
    db,
    sql`select w.pid from job_claims c join job_workers w on w.id = c.worker_id
        join pgboss.job j on j.id = c.job_id where j.data->>'operation_id' = ${operationId} limit 1`,
  );
  return rows[0] ? Number(rows[0].pid) : null;
}

/** A small seeded generator (mulberry32): the same seed gives the same trials. */
export function seeded(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

/** p50 and max of a list of numbers (null when empty). */
export function spread(values: number[]) {
  if (values.length === 0) return { p50: null, max: null };
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: sorted[Math.floor((sorted.length - 1) / 2)] ?? null, max: sorted.at(-1) ?? null };
}
