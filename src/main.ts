import fs from 'node:fs';
import path from 'node:path';
import { count } from 'drizzle-orm';
import { pino } from 'pino';
import { buildApp, buildProbeApp } from './app.js';
import { createManualClock, systemClock } from './clock.js';
import type { Config } from './config.js';
import { type Database, type DbOptions, openDatabase, withAdvisoryLock } from './db/client.js';
import { migrateDatabase } from './db/migrate.js';
import { accounts } from './db/schema.js';
import { PGLITE_TEMPLATE_DIR } from './db/template.js';
import { endSpawner } from './drivers/local/spawner.js';
import { createOutage } from './jobs/outage.js';
import { createJobQueue } from './jobs/queue.js';
import { createWorker } from './jobs/worker.js';
import { createMetrics, type Metrics } from './modules/metrics/metrics.service.js';
import { loadOrCreateSecret } from './secrets.js';
import { createServices } from './services.js';

/** Arbitrary constant key of the advisory lock that makes the demo account once (PostgreSQL). */
const DEMO_LOCK_KEY = 727_274_003;

/**
 * What a PostgreSQL pool of this process waits for (issue 9): `api` serves requests, so it gives up
 * early and the request answers 503; `background` (jobs, sweeps, migrations) may wait longer.
 */
export function databaseOptions(
  config: Config,
  use: 'api' | 'background',
  onError?: (err: Error) => void,
): DbOptions {
  // A missing data dir starts as a copy of the build's migrated template (db/template.ts).
  if (config.db.kind !== 'postgres') return { ...config.db, template: PGLITE_TEMPLATE_DIR };
  const { acquireTimeoutMs, apiStatementTimeoutMs, jobStatementTimeoutMs } = config.dbBudget;
  const budget =
    use === 'api'
      ? { acquireTimeoutMs, statementTimeoutMs: apiStatementTimeoutMs }
      : { acquireTimeoutMs: Math.max(acquireTimeoutMs, 10_000), statementTimeoutMs: jobStatementTimeoutMs };
  return { ...config.db, budget, ...(onError && { onError }) };
}

/** Opens and migrates the database named by the config (PGlite in DATA_DIR, or PostgreSQL). */
export async function openConfiguredDatabase(
  config: Config,
  onError?: (err: Error) => void,
): Promise<Database> {
  const database = await openDatabase(databaseOptions(config, 'background', onError));
  try {
    await migrateDatabase(database);
    return database;
  } catch (err) {
    await database.close();
    throw err;
  }
}

/** Pino options of the API: LOG_LEVEL, and no credential or secret in a log line (design.md, Secrets). */
export function loggerOptions(config: Config) {
  return {
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.private_key'],
      remove: true,
    },
    // A database error carries its query parameters (and its cause's): hashes, sealed keys, emails.
    // They never reach a log line; the SQL text and the error code do.
    serializers: { err: errWithoutParams },
  };
}

interface SerializedError {
  [key: string]: unknown;
  type: string;
  message: string;
  stack: string;
}

/** pino's error shape, keeping only scalar fields (code, query, constraint...) and never `params`. */
export function errWithoutParams(err: Error): SerializedError {
  // Drizzle writes the parameters into its message too ("Failed query: ...\nparams: ...").
  const scrub = (text: string) => text.replace(/\nparams: [\s\S]*?(?=\n {4}at |$)/, '\nparams: [redacted]');
  const out: SerializedError = { type: err.name, message: scrub(err.message), stack: scrub(err.stack ?? '') };
  for (const [key, value] of Object.entries(err)) {
    if (key === 'params' || key === 'cause') continue;
    if (['string', 'number', 'boolean'].includes(typeof value)) out[key] = value;
  }
  if (err.cause instanceof Error) out.cause = errWithoutParams(err.cause);
  return out;
}

/**
 * Issue 28 finding 5: DATA_DIR (its secret key, admin token, embedded database) made 0700 at every
 * start. A HOSTING_ROOT inside it (set so, or made there by an earlier version) keeps it passable,
 * 0711 (listable by no one else), as the install users and nginx must pass. Answers the mode set,
 * or null when this process does not own DATA_DIR (its owner's mode is left alone).
 */
export function secureDataDir(config: Config): number | null {
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  if (fs.statSync(config.dataDir).uid !== process.getuid?.()) return null;
  const root = config.driver.local?.hostingRoot;
  const inside = root !== undefined && path.relative(config.dataDir, root).split(path.sep)[0] !== '..';
  const mode = inside ? 0o711 : 0o700;
  fs.chmodSync(config.dataDir, mode);
  return mode;
}

/** `serve` = API + worker in one process (the only mode on PGlite); `api` and `worker` split them. */
export type ProcessRole = 'serve' | 'api' | 'worker';

/** Why a role cannot run with this config, or null. */
export function roleProblem(config: Config, role: ProcessRole): string | null {
  if (role === 'serve') return null;
  if (config.db.kind === 'pglite') {
    return (
      `hostplane ${role} needs PostgreSQL (DATABASE_URL=postgres://...): the embedded database ` +
      'allows one process, so run "hostplane serve" (API and worker in one process)'
    );
  }
  if (config.clockMode === 'manual') {
    return `hostplane ${role} cannot use HOSTPLANE_CLOCK=manual: the manual clock lives in one process; run "hostplane serve"`;
  }
  return null;
}

/**
 * Composition root: config -> db (+lock) -> migrate -> queue -> app and/or worker -> listen; on
 * SIGINT/SIGTERM the HTTP server closes, the worker drains, then the queue and the database close.
 */
export async function start(config: Config, role: ProcessRole, print: (line: string) => void = console.log) {
  const problem = roleProblem(config, role);
  if (problem) throw new Error(problem);
  // Issue 28: what this process writes (secrets, the embedded database, backups, the web tier's
  // files) is its own unless a file is given a mode on purpose; DATA_DIR is no one else's.
  process.umask(0o077);
  const dataDirMode = secureDataDir(config);
  const logOptions = loggerOptions(config);
  const log = pino(logOptions);
  // One log line per database outage from all background loops of this process (jobs/outage.ts).
  const outage = createOutage(log);
  // Made once the databases are open; a connection lost before that is only logged.
  let metrics: Metrics | undefined;
  const lost = (err: Error) => {
    metrics?.connectionError();
    if (role === 'api') log.warn({ err }, 'database connection lost');
    else outage.failed('database connection', err);
  };
  // Background work (migrations, the queue, the worker) has its own pool with the longer budget; on
  // PostgreSQL, requests get a second pool whose short budget answers 503 within seconds (G11).
  const database = await openConfiguredDatabase(config, lost);
  const apiDatabase =
    role === 'worker'
      ? null
      : database.kind === 'postgres'
        ? await openDatabase(databaseOptions(config, 'api', lost))
        : database;
  const clock = config.clockMode === 'manual' ? createManualClock() : systemClock;
  const queue = createJobQueue({
    database,
    jobs: config.jobs,
    ...(config.db.kind === 'postgres' && { databaseUrl: config.db.url }),
    onError: (err) => outage.failed('job queue', err),
  });
  await queue.start({ maintenance: role !== 'api' });
  // One registry for the process: requests of the API, jobs of the worker, both pools.
  metrics = createMetrics({
    database: apiDatabase ?? database,
    pools:
      apiDatabase === database
        ? { main: database }
        : apiDatabase
          ? { api: apiDatabase, background: database }
          : { background: database },
    queueNames: queue.queueNames(),
  });
  const admin = loadOrCreateSecret(config.adminToken, config.dataDir, 'admin-token');
  const secretKey = loadOrCreateSecret(config.secretKey, config.dataDir, 'secret-key').value;
  // ioredis loads only when REDIS_URL is set (issue 14: a start loads what it uses).
  const redis =
    config.redisUrl && role !== 'worker'
      ? (await import('./redis.js')).createRedis(config.redisUrl)
      : undefined;
  // The services, built once per pool: requests' on the API pool, and the worker's handlers on the
  // background pool (a long step keeps its longer budget); one graph when the two are one pool.
  const serviceDeps = { config, clock, secretKey, queue };
  const apiServices = apiDatabase ? createServices({ ...serviceDeps, database: apiDatabase }) : null;
  const jobServices =
    role === 'api'
      ? null
      : apiServices && apiDatabase === database
        ? apiServices
        : createServices({ ...serviceDeps, database });
  const app =
    apiDatabase && apiServices
      ? await buildApp({
          config,
          services: apiServices,
          database: apiDatabase,
          metrics,
          adminToken: admin.value,
          redis,
          logger: logOptions,
        })
      : null;
  const worker = jobServices
    ? createWorker({
        queue,
        handlers: jobServices.jobHandlers,
        sweep: jobServices.due.sweep,
        log,
        outage,
        config: config.jobs,
      })
    : null;
  if (worker) metrics.observeJobs(worker.runner.events);
  const probe =
    role === 'worker' && config.metricsPort !== null
      ? await buildProbeApp({ config, database, metrics, logger: logOptions })
      : null;

  // Installed before the banner: a supervisor that signals as soon as it reads it gets a clean stop.
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal }, 'shutting down');
    await app?.close();
    await probe?.close();
    await worker?.stop();
    // What the services opened for the driver (the local driver's MariaDB pool), once the worker stopped.
    await apiServices?.closeDriver();
    if (jobServices !== apiServices) await jobServices?.closeDriver();
    await queue.stop();
    if (apiDatabase && apiDatabase !== database) await apiDatabase.close();
    await database.close();
    redis?.disconnect();
    // The tools' spawner reaped by this process (its CPU counted in this process's children).
    await endSpawner();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      shutdown(signal).then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }

  // Issue 21: what serves the installs (the local driver's nginx and PHP-FPM) runs whenever serve or a
  // worker does, not only after a first provisioning; running daemons are left alone.
  await jobServices?.driver.start?.();
  // Issue 31: sshd's key lookups, login records and session reaper, beside the driver that runs sshd.
  await jobServices?.sshAccess?.start();
  // Counted where it runs (the app registered its own graph's, which is this one on one pool).
  if (jobServices?.sshAccess && jobServices !== apiServices) metrics.observeSsh(jobServices.sshAccess.stats);
  await jobServices?.scheduleTrafficRoll();
  // Issue 20: with an API, the worker starts once it listens (below): its first round fetches from
  // every queue, and on PGlite (one connection) the start's own queries waited behind those fetches.
  if (!app) await worker?.start();
  const where = database.kind === 'pglite' ? `embedded PGlite (${config.dataDir})` : 'PostgreSQL';
  if (database.created?.from === 'template')
    print("Embedded database created from the build's migrated template");
  if (database.created?.from === 'initdb')
    print(
      `Embedded database created by initdb (the build's template was not used: ${database.created.reason})`,
    );
  if (!app) {
    print(`Hostplane worker is running ${queue.queueNames().length} job queues on ${where}`);
    if (probe) {
      await probe.listen({ port: config.metricsPort ?? 0, host: config.host });
      const address = probe.server.address();
      const port = typeof address === 'object' && address ? address.port : config.metricsPort;
      print(`Metrics and probes: http://127.0.0.1:${port}/metrics, /healthz, /readyz`);
    }
    return { app, worker, database, shutdown, port: null };
  }

  // The demo account of an empty database, made once even when several processes start together.
  const demo = await withAdvisoryLock(database, DEMO_LOCK_KEY, async () => {
    const [existing] = await database.db.select({ n: count() }).from(accounts);
    return Number(existing?.n ?? 0) === 0 ? await app.services.admin.createDemo() : null;
  });

  await app.listen({ port: config.port, host: config.host });
  await worker?.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const base = config.publicUrl ?? `http://127.0.0.1:${port}`;
  print(`Hostplane is serving ${base}/v1 on ${where}`);
  print(
    worker
      ? `Jobs: running in this process (${queue.queueNames().length} queues, ${jobServices?.driver.name} hosting driver)`
      : 'Jobs: not run here (API only); run "hostplane worker" beside it',
  );
  if (config.clockMode === 'manual')
    print(`Clock: manual (${clock.now().toISOString()}); move it with POST /admin/v1/clock`);
  print(`OpenAPI: ${base}/v1/swagger  docs: ${base}/docs`);
  if (dataDirMode === 0o711)
    print(
      `DATA_DIR ${config.dataDir} stays passable (0711): HOSTING_ROOT is inside it; move it out (hostplane doctor)`,
    );
  if (admin.generated)
    print(`Admin token (shown once, stored in ${config.dataDir}/admin-token): ${admin.value}`);
  if (demo) {
    print('Demo account created. Credentials (shown once):');
    print(`  ${demo.username}:${demo.password}`);
    print(`  curl -u '${demo.username}:${demo.password}' '${base}/v1/sites?account_id=${demo.accountId}'`);
  }

  return { app, worker, database, shutdown, port };
}

/** `hostplane serve`: the API and the job worker in one process. */
export const serve = (config: Config, print?: (line: string) => void) => start(config, 'serve', print);
