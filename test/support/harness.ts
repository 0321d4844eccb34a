import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { sql } from 'drizzle-orm';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import { type App, buildApp } from '../../src/app.js';
import { createManualClock, type ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { type Database, queryRows } from '../../src/db/client.js';
import { localInstalls } from '../../src/db/schema.js';
import { BOSS_SCHEMA, createJobQueue, type JobQueue } from '../../src/jobs/queue.js';
import { createJobRunner, type JobRunner } from '../../src/jobs/worker.js';
import type { Mailer } from '../../src/mail/mailer.js';
import { loggerOptions } from '../../src/main.js';
import { createMetrics } from '../../src/modules/metrics/metrics.service.js';
import { createServices } from '../../src/services.js';
import { cloneDatabase } from './databases.js';
import { localHosting } from './local-hosting.js';
import { checkWire } from './wire.js';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are arbitrary JSON, asserted field by field.
export type Json = any;

export interface Res {
  status: number;
  body: Json;
  headers: LightMyRequestResponse['headers'];
  raw: LightMyRequestResponse;
}

export type Method = 'GET' | 'HEAD' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

export interface Client {
  request(method: Method, url: string, body?: unknown, headers?: Record<string, string>): Promise<Res>;
  get(url: string): Promise<Res>;
  post(url: string, body?: unknown): Promise<Res>;
  patch(url: string, body?: unknown): Promise<Res>;
  put(url: string, body?: unknown): Promise<Res>;
  delete(url: string): Promise<Res>;
}

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A clock the tests move by hand (the manual clock of HOSTPLANE_CLOCK=manual). */
export const testClock = (start = new Date()): ManualClock => createManualClock(start);

/** Every simulated operation takes no time unless a test sets SIMULATED_DURATIONS itself. */
export const INSTANT_DURATIONS =
  'provision=0,copy=0,backup=0,restore=0,measure_disk=0,purge_cache=0,move_site=0,issue_certificate=0';

function toRes(raw: LightMyRequestResponse): Res {
  let body: Json = null;
  if (raw.body.length > 0) {
    try {
      body = JSON.parse(raw.body);
    } catch {
      body = raw.body;
    }
  }
  return { status: raw.statusCode, body, headers: raw.headers, raw };
}

/** A client that sends the given Authorization header (or none) through app.inject. */
export function clientFor(app: App, authorization?: string): Client {
  const request = async (
    method: Method,
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const raw = await app.inject({
      method,
      url,
      headers: { ...(authorization && { authorization }), ...headers },
      ...(body !== undefined && { payload: body as object }),
    });
    return toRes(raw);
  };
  return {
    request,
    get: (url) => request('GET', url),
    post: (url, body) => request('POST', url, body),
    patch: (url, body) => request('PATCH', url, body),
    put: (url, body) => request('PUT', url, body),
    delete: (url) => request('DELETE', url),
  };
}

export const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;

export const uniqueName = (prefix = 'i') => `${prefix}${randomBytes(5).toString('hex')}`;

/** HOSTPLANE_SECRET_KEY of the tests (a file may pass its own through `env`). */
export const SECRET_KEY = 'test-secret-key-0123456789abcdefghijklmnop';

export interface StartedApp {
  app: App;
  clock: ManualClock;
  admin: Client;
  anonymous: Client;
  /** The started job queue of the app's database (no workers run: see runJobs). */
  queue: JobQueue;
  runner: JobRunner;
  /**
   * Runs due work and every queued job now, one at a time, until none is left (retry back-off is
   * skipped): tests never wait on polling. Answers how many jobs ran.
   */
  runJobs(): Promise<number>;
  /** What the job runner logged (failed attempts), for assertions and debugging. */
  jobLog: { level: string; msg: string; obj: object }[];
  /** Closes the app and its queue (not its database). */
  close(): Promise<void>;
}

export interface TestApp extends StartedApp {
  database: Database;
  /** Set on PostgreSQL: the URL of this file's database. */
  databaseUrl?: string;
  /** Closes the app and drops its database. */
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** Where pino writes, with the production logger options (src/main.ts); no logs when unset. */
  logStream?: NodeJS.WritableStream;
  /** Shared rate-limit store (what REDIS_URL gives in production). */
  redis?: Redis;
  /** Default: from the env (SMTP_URL), else mail is kept in the outbox. */
  mailer?: Mailer;
  /** PostgreSQL URL of the database, for the queue's LISTEN wake-ups (optional: tests use runJobs). */
  databaseUrl?: string;
  /**
   * The hosting driver (buildTestApp): `simulated` (default) or `local` (issue 16), on a HOSTING_ROOT
   * of the file's own and the machine's MariaDB; what it made is removed after the file.
   */
  driver?: 'simulated' | 'local';
}

/**
 * Wire conformance (issue 13): every response of `app.inject` (so of every client of the harness) is
 * validated against the reference document's schema of its operation and status; a drift throws in
 * the test that made the request (test/support/wire.ts).
 */
function checkResponsesAgainstReference(app: App) {
  const inject = app.inject.bind(app);
  const checked = async (options: InjectOptions | string) => {
    const res = await inject(options);
    const { method = 'GET', url = '/' } =
      typeof options === 'string' ? { url: options } : { method: options.method, url: options.url };
    checkWire(
      app.routes,
      String(method),
      typeof url === 'string' ? url : String(url),
      res.statusCode,
      res.body,
    );
    return res;
  };
  app.inject = checked as App['inject'];
}

/**
 * The queue as `runJobs` (the runner's drain) sees it, with the same answers: a fetch from a queue
 * that holds no job it could take (created or retry; runJobs ignores start_after) answers [] without
 * a fetch statement. A drain tries every queue (24) each round, and each fetch is a statement of its
 * own (slow on PGlite); one look at which queues hold such jobs replaces the empty ones, and it is
 * looked at again after every fetch, since a job that ran may have enqueued others.
 */
function skipEmptyQueues(queue: JobQueue, database: Database) {
  let ready: Set<string> | null = null;
  const readyQueues = async () => {
    const rows = await queryRows<{ name: string }>(
      database.db,
      sql.raw(`select distinct name from ${BOSS_SCHEMA}.job where state < 'active'`),
    );
    return new Set(rows.map((r) => r.name));
  };
  const filtered: Pick<JobQueue, 'fetch' | 'complete' | 'fail' | 'release' | 'queueNames'> = {
    queueNames: () => queue.queueNames(),
    complete: (...args) => queue.complete(...args),
    fail: (...args) => queue.fail(...args),
    release: (...args) => queue.release(...args),
    async fetch(name, batchSize, options) {
      ready ??= await readyQueues();
      if (!ready.has(name)) return [];
      ready = null;
      return queue.fetch(name, batchSize, options);
    },
  };
  /** Called at the start of every drain round (its sweep): jobs may have come since the last look. */
  const forget = () => {
    ready = null;
  };
  return { queue: filtered, forget };
}

/**
 * Builds and readies an app, with its job queue, on a database the caller owns (a test file's clone,
 * or the same database opened another way, e.g. through a TCP proxy). The caller closes it;
 * {@link buildTestApp} does so. Defaults: manual clock, faults on, instant simulated durations.
 */
export async function startApp(database: Database, options: TestAppOptions = {}): Promise<StartedApp> {
  const config = loadConfig({
    DATA_DIR: '.tmp/data-unused',
    RATE_LIMIT_PER_MINUTE: '0',
    // Issue 20: failed sign-in counters off, like the rate limit (every test signs in from 127.0.0.1
    // on a clock that does not move); test/api/auth-load.test.ts turns them on.
    AUTH_FAILURES_PER_IP: '0',
    AUTH_FAILURES_PER_IP_USER: '0',
    AUTH_FAILURES_PER_USER: '0',
    // New credentials hashed at N=2^10, not 2^15 (each was ~0.1 CPU-s, ~1,450 per run: docs/decisions.md
    // #120); test/api/auth-load.test.ts hashes at the production cost.
    PASSWORD_HASH_COST: '10',
    HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    HOSTPLANE_SECRET_KEY: SECRET_KEY,
    HOSTPLANE_CLOCK: 'manual',
    HOSTPLANE_FAULTS: 'on',
    SIMULATED_DURATIONS: INSTANT_DURATIONS,
    // No DNS query leaves the machine (a domain's background verification, decision 249): a port
    // nothing listens on refuses at once (a 503 for the lookup). Files that test DNS start a server.
    DNS_SERVERS: '127.0.0.1:9',
    ...options.env,
  });
  const clock = testClock();
  const queue = createJobQueue({
    database,
    jobs: config.jobs,
    ...(options.databaseUrl && { databaseUrl: options.databaseUrl }),
  });
  await queue.start();
  // The composition root of the tests, as src/main.ts's of one process on one pool.
  const services = createServices({
    config,
    database,
    clock,
    secretKey: config.secretKey ?? SECRET_KEY,
    queue,
    ...(options.mailer && { mailer: options.mailer }),
  });
  const metrics = createMetrics({ database, pools: { main: database }, queueNames: queue.queueNames() });
  const app = await buildApp({
    config,
    services,
    database,
    metrics,
    adminToken: ADMIN_TOKEN,
    logger: options.logStream ? { ...loggerOptions(config), stream: options.logStream } : false,
    ...(options.redis && { redis: options.redis }),
  });
  checkResponsesAgainstReference(app);
  await app.ready();
  const jobLog: StartedApp['jobLog'] = [];
  const record = (level: string) => (obj: object, msg: string) => {
    jobLog.push({ level, msg, obj });
  };
  const drained = skipEmptyQueues(queue, database);
  const runner = createJobRunner({
    queue: drained.queue,
    handlers: app.services.jobHandlers,
    sweep: async () => {
      drained.forget();
      return app.services.due.sweep();
    },
    log: { info: record('info'), warn: record('warn'), error: record('error') },
  });
  // What a worker in the app's process does (src/main.ts): its jobs count in the app's /metrics.
  app.metrics.observeJobs(runner.events);
  return {
    app,
    clock,
    admin: clientFor(app, `Bearer ${ADMIN_TOKEN}`),
    anonymous: clientFor(app),
    queue,
    runner,
    runJobs: () => runner.drain(),
    jobLog,
    close: async () => {
      await app.close();
      await services.closeDriver();
      await queue.stop();
    },
  };
}

/**
 * Builds the app on a fresh clone of the migrated template database. Closed automatically after the
 * test file (the node:test `after` hook): call it at the top level of the file (top-level await),
 * and finish all top-level setup before the first `describe`/`it`: node:test starts running declared
 * tests while top-level code is still awaiting, and may close the file's apps under it.
 */
export async function buildTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const cloned = await cloneDatabase();
  const host = options.driver === 'local' ? await localHosting({ autoCleanup: false }) : null;
  const started = await startApp(cloned.database, {
    ...options,
    ...(host && { env: { ...host.env, ...options.env } }),
    ...(cloned.url && { databaseUrl: cloned.url }),
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    // The local driver's databases and users are named from install ids: remembered before the drop.
    if (host)
      for (const row of await cloned.database.db.select().from(localInstalls)) host.paths(row.install_id);
    await started.close();
    await cloned.drop();
    await host?.cleanup();
  };
  after(close);
  return {
    ...started,
    database: cloned.database,
    ...(cloned.url && { databaseUrl: cloned.url }),
    close,
  };
}
