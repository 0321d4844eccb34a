import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import type { PGlite } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import type { SelectResultFields } from 'drizzle-orm/query-builders/select.types';
import pg from 'pg';
import { COMMIT_OUTCOME_UNKNOWN, isDatabaseUnavailable } from './errors.js';
import { schema } from './schema.js';
import { copyTemplate } from './template.js';

/** One database type for both drivers; a transaction handle (`tx`) has the same type. */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

/** An open database: the Drizzle handle plus what only the composition root needs. */
export interface Database {
  readonly kind: 'pglite' | 'postgres';
  readonly db: Db;
  /** Set on PGlite only. */
  readonly pglite?: PGlite;
  /** Set on PostgreSQL only. */
  readonly pool?: pg.Pool;
  /**
   * Set on PGlite only: counts every statement and transaction that may have written, as each ends.
   * PGlite is held by this process alone (a lock file, see openPgliteDir), so an unchanged count
   * proves that no write committed in between: the read cache then skips its freshness lookup.
   */
  readonly writes?: WriteCounter;
  /**
   * PGlite data dir only, set when this open created it: `template` (a copy of the build's migrated
   * template) or `initdb` (with why the template was not used).
   */
  readonly created?: { from: 'template' } | { from: 'initdb'; reason: string };
  close(): Promise<void>;
}

/** See Database.writes. */
export interface WriteCounter {
  readonly count: number;
}

/** A statement that cannot write: a plain SELECT (PGlite runs no function of ours that writes). */
const READ_ONLY = /^\s*select\s/i;

/**
 * Counts, on a PGlite instance, every query, exec and transaction that may have written, when it
 * settles (committed or not), so a count read before a lookup began moves if a write ended after.
 * A plain SELECT outside a transaction is not counted; everything else is (conservative).
 */
function countWrites(pglite: PGlite): WriteCounter {
  const counter = { count: 0 };
  const ended = () => {
    counter.count++;
  };
  const query = pglite.query.bind(pglite);
  const exec = pglite.exec.bind(pglite);
  const transaction = pglite.transaction.bind(pglite);
  pglite.query = ((text: string, ...rest: unknown[]) => {
    const result = (query as (...args: unknown[]) => Promise<unknown>)(text, ...rest);
    return READ_ONLY.test(text) ? result : result.finally(ended);
  }) as PGlite['query'];
  pglite.exec = ((...args: Parameters<PGlite['exec']>) => exec(...args).finally(ended)) as PGlite['exec'];
  pglite.transaction = ((...args: Parameters<PGlite['transaction']>) =>
    transaction(...args).finally(ended)) as PGlite['transaction'];
  return counter;
}

/** How long a PostgreSQL pool waits: a request's budget is short (503 fast), background work's long. */
export interface DbBudget {
  /** Waiting for a pooled connection, or for a new one to open. */
  acquireTimeoutMs: number;
  /** One statement, server side; the client gives up (and drops the connection) 1 s later. */
  statementTimeoutMs: number;
}

/** Background work (jobs, sweeps, migrations, tests' own handles): the budget before issue 9. */
export const BACKGROUND_BUDGET: DbBudget = { acquireTimeoutMs: 3000, statementTimeoutMs: 15_000 };

export type DbOptions =
  | {
      kind: 'postgres';
      url: string;
      poolSize?: number;
      budget?: DbBudget;
      /** A pooled connection failed (idle or in use); nothing else is needed, the pool replaces it. */
      onError?: (err: Error) => void;
    }
  | {
      kind: 'pglite';
      dir: string;
      /** A template (db/template.ts) a missing `dir` is copied from; default none (initdb). */
      template?: string;
      wasm?: PgliteWasm;
    }
  | { kind: 'pglite-memory'; loadDataDir?: Blob; wasm?: PgliteWasm };

/**
 * The types Drizzle's PGlite driver reads as PostgreSQL's text (timestamp, timestamptz, interval,
 * date, numeric[], timestamp[], timestamptz[], interval[], date[]): it passes identity parsers for them
 * with every statement, and PGlite merges those into its own parsers of every type in the catalog
 * (~400: one per array type, tables' row types included) for each statement (`{...this.parsers,
 * ...options.parsers}`): ~0.15 ms and as much again in garbage per statement, a quarter to a third of
 * a PGlite test file's CPU (docs/decisions.md #236). The instance is given them once, when it has
 * started (its array types' parsers are set then), and Drizzle's statements pass none
 * (withoutDrizzleParsers). pg-boss's own handle (jobs/queue.adapters.ts) reads these types as text
 * too, as its calls inside our transactions always did (they go through Drizzle).
 */
const DRIZZLE_TEXT_TYPES = [1114, 1184, 1186, 1082, 1231, 1115, 1185, 1187, 1182];
const asText = (value: string) => value;
const PGLITE_PARSERS = Object.fromEntries(DRIZZLE_TEXT_TYPES.map((oid) => [oid, asText]));

type QueryOptions = { parsers?: Record<string, unknown> } | undefined;
/** Options without `parsers` when they are only Drizzle's identity ones (the instance has them). */
function dropDrizzleParsers(options: QueryOptions): QueryOptions {
  if (!options?.parsers) return options;
  for (const key of Object.keys(options.parsers))
    if (!DRIZZLE_TEXT_TYPES.includes(Number(key))) return options;
  const { parsers: _, ...rest } = options;
  return rest;
}
type Queries = Pick<PGlite, 'query'>;
function queriesWithoutDrizzleParsers<T extends Queries>(target: T): T {
  const query = ((text: string, params?: unknown[], options?: QueryOptions) =>
    target.query(text, params, dropDrizzleParsers(options) as never)) as PGlite['query'];
  return new Proxy(target, {
    get: (t, key) => (key === 'query' ? query : Reflect.get(t, key, t)),
  });
}
/** The PGlite handle Drizzle is given: its statements' (and its transactions') identity parsers dropped. */
function withoutDrizzleParsers(pglite: PGlite): PGlite {
  const transaction = ((fn: (tx: Queries) => Promise<unknown>) =>
    pglite.transaction((tx) => fn(queriesWithoutDrizzleParsers(tx)))) as PGlite['transaction'];
  const query = queriesWithoutDrizzleParsers(pglite).query;
  return new Proxy(pglite, {
    get: (t, key) => {
      if (key === 'query') return query;
      if (key === 'transaction') return transaction;
      const value = Reflect.get(t, key, t);
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

/** Which V8 compilers run PGlite's WASM: the baseline one only (the default), or both (decision 122). */
export type PgliteWasm = 'baseline' | 'optimizing';

/**
 * PGlite runs PostgreSQL in one WASM heap, where shared_buffers (128 MB by default) becomes resident
 * as it is used: it was a third of an idle server's memory. 16 MB holds this service's hot pages
 * (pages read beyond it come from the OS page cache); bench/README.md "Start-up and memory".
 */
const PGLITE_SETTINGS = ['shared_buffers=16MB'];
const pgliteStartParams = (pglite: typeof PGlite) => [
  ...pglite.defaultStartParams,
  ...PGLITE_SETTINGS.flatMap((s) => ['-c', s]),
];

/**
 * Issue 20 (decision 122): PGlite's PostgreSQL is one ~10 MB WASM module, and V8 by default re-compiles
 * its hot functions with its optimizing compiler (TurboFan) on background threads while the database
 * starts: on 2 cores that compilation took ~0.5 s of a reopen and ~60-90 MB of resident code. Liftoff,
 * the baseline compiler every function starts with, runs this service's small queries as fast (the JS
 * around each query dominates); a large join runs ~1.4x slower. The flag is read when a module is
 * compiled, so it is set before PGlite's is; it holds for the rest of the process and for every WASM
 * module in it (PGlite's is the only large one), so `optimizing` only ever means "not set here".
 */
function chooseWasmCompilers(wasm: PgliteWasm = 'baseline') {
  if (wasm === 'baseline') v8.setFlagsFromString('--liftoff-only');
}

/**
 * Issue 20: each driver's modules load only when a database of its kind is opened: PGlite (its
 * module and Drizzle's PGlite driver, ~10 MB and tens of ms) never on a PostgreSQL start, Drizzle's
 * node-postgres driver never on an embedded one. (pg itself always loads: pg-boss needs it.)
 */
async function loadPglite(wasm?: PgliteWasm) {
  chooseWasmCompilers(wasm);
  const [{ PGlite }, { drizzle }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
  ]);
  return { PGlite, drizzle };
}

/** Opens PostgreSQL through a pg pool, or PGlite (in a data dir or in memory). */
export async function openDatabase(options: DbOptions): Promise<Database> {
  if (options.kind === 'postgres') {
    const { drizzle } = await import('drizzle-orm/node-postgres');
    return openPostgres(
      drizzle,
      options.url,
      options.poolSize ?? 10,
      options.budget ?? BACKGROUND_BUDGET,
      options.onError,
    );
  }
  const driver = await loadPglite(options.wasm);
  if (options.kind === 'pglite-memory') {
    const pglite = await driver.PGlite.create({
      startParams: pgliteStartParams(driver.PGlite),
      ...(options.loadDataDir && { loadDataDir: options.loadDataDir }),
    });
    return wrapPglite(driver, pglite, async () => {});
  }
  return openPgliteDir(driver, options.dir, options.template);
}

/**
 * The pool's pg client, with two repairs for a database that goes away mid-use (issue 9):
 * - A query's read timeout drops the connection. Otherwise the connection stays busy with the
 *   unanswered query (a silent database), and every later query on it (the transaction's ROLLBACK,
 *   the next request's) waits a timeout of its own. Dropped, every queued query fails at once.
 * - A client that fails while checked out is released to the pool (which discards it), and a
 *   second release is a no-op. Drizzle's transaction() releases only when its BEGIN succeeded: a
 *   BEGIN on a dying connection leaked the client, and an outage could exhaust the pool for good.
 */
class DeadlineClient extends pg.Client {}
type Release = (err?: Error | boolean) => void;
const RELEASE = Symbol('release');
type Leased = pg.Client & { [RELEASE]?: Release };
Object.defineProperty(DeadlineClient.prototype, 'release', {
  configurable: true,
  get(this: Leased) {
    return this[RELEASE];
  },
  // pg-pool assigns a fresh release function at every checkout.
  set(this: Leased, poolRelease: Release) {
    let released = false;
    this[RELEASE] = (err) => {
      if (released) return;
      released = true;
      poolRelease(err);
    };
  },
});
const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
function dropIfTimedOut(client: pg.Client, err: unknown) {
  if (err instanceof Error && err.message === 'Query read timeout') {
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  }
}
/** The statement's text, whether pg was given it as a string or in a query config. */
function textOf(statement: unknown): string {
  if (typeof statement === 'string') return statement;
  const text = (statement as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : '';
}
const IN_TRANSACTION = Symbol('inTransaction');
const LOST_COMMIT = Symbol('lostCommit');
type Tracked = pg.Client & { [IN_TRANSACTION]?: boolean; [LOST_COMMIT]?: boolean };
const BEGIN = /^\s*(begin|start\s+transaction)\b/i;
const COMMIT = /^\s*(commit|end)\s*;?\s*$/i;
const ROLLBACK = /^\s*(rollback|abort)\s*;?\s*$/i;
const READ = /^\s*(select|show|values|explain)\b/i;
const isRead = (text: string) =>
  READ.test(text) || (/^\s*with\b/i.test(text) && !/\b(insert|update|delete|merge)\b/i.test(text));
/**
 * Whether `text`, about to be sent, commits when the database receives it: a COMMIT, or a statement
 * that changes data sent outside a transaction (committed on its own). Inside a transaction, a lost
 * connection rolls everything back. Follows the client's BEGIN/COMMIT/ROLLBACK.
 */
function commitsOnReceipt(client: Tracked, text: string): boolean {
  if (BEGIN.test(text)) {
    client[IN_TRANSACTION] = true;
    return false;
  }
  const commit = COMMIT.test(text);
  if (commit || ROLLBACK.test(text)) {
    const open = client[IN_TRANSACTION] === true;
    client[IN_TRANSACTION] = false;
    return open && commit;
  }
  return client[IN_TRANSACTION] !== true && !isRead(text);
}
/**
 * Decision 246: a statement that commits on receipt and whose answer never came (read timeout,
 * connection reset) may have been applied: the database commits on receiving it, and the answer is
 * what was lost. Its error is marked, so that the request says so (http/error-handler.ts) instead of
 * "nothing was changed".
 */
function markLostCommit(client: Tracked, commits: boolean, err: unknown) {
  // Drizzle answers a failed COMMIT with a ROLLBACK on the same (now closed) client and throws the
  // ROLLBACK's error: every later error of a client that lost a commit's answer says so too.
  if (!(err instanceof Error) || !(commits || client[LOST_COMMIT]) || !isDatabaseUnavailable(err)) return;
  client[LOST_COMMIT] = true;
  Object.assign(err, { [COMMIT_OUTCOME_UNKNOWN]: true });
}
DeadlineClient.prototype.query = function query(this: pg.Client, ...args: unknown[]) {
  const commits = commitsOnReceipt(this, textOf(args[0]));
  // What a failed statement does, in either of pg's forms (callback or promise).
  const failed = (err: unknown) => {
    dropIfTimedOut(this, err);
    markLostCommit(this, commits, err);
  };
  const callback = args.at(-1);
  if (typeof callback === 'function') {
    args[args.length - 1] = (err: unknown, res: unknown) => {
      failed(err);
      callback(err, res);
    };
    return clientQuery.apply(this, args);
  }
  const result = clientQuery.apply(this, args);
  if (!(result instanceof Promise)) return result;
  // The caller gets the same rejection, its error marked when a commit's answer was lost.
  return result.catch((err: unknown) => {
    failed(err);
    throw err;
  });
} as typeof pg.Client.prototype.query;

type DrizzlePg = typeof import('drizzle-orm/node-postgres').drizzle;
type PgliteDriver = Awaited<ReturnType<typeof loadPglite>>;

function openPostgres(
  drizzlePg: DrizzlePg,
  url: string,
  max: number,
  budget: DbBudget,
  onError?: (err: Error) => void,
): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    Client: DeadlineClient,
    // G11: fail fast when the database is unreachable instead of queueing requests forever.
    connectionTimeoutMillis: budget.acquireTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: budget.statementTimeoutMs,
    // A connection that stays open but no longer answers (a frozen network path) would hang its
    // query forever: the client gives up a little after the server-side statement timeout.
    query_timeout: budget.statementTimeoutMs + 1000,
    keepAlive: true,
  });
  // A client that loses its connection emits 'error'; without a listener the process would crash.
  // pg-pool listens only while the client is idle (and re-emits on the pool), so every client gets
  // its own listener for the time it is in use (a transaction between two statements).
  pool.on('error', () => {});
  pool.on('connect', (client) =>
    client.on('error', (err) => {
      onError?.(err);
      (client as Leased)[RELEASE]?.(err);
    }),
  );
  return {
    kind: 'postgres',
    db: drizzlePg(pool, { schema }) as unknown as Db,
    pool,
    close: () => pool.end(),
  };
}

function wrapPglite(driver: PgliteDriver, pglite: PGlite, release: () => Promise<void>): Database {
  const writes = countWrites(pglite);
  // After its start: PGlite then sets the parsers of the array types (to parse their elements).
  Object.assign(pglite.parsers, PGLITE_PARSERS);
  return {
    kind: 'pglite',
    db: driver.drizzle(withoutDrizzleParsers(pglite), { schema }) as unknown as Db,
    pglite,
    writes,
    close: async () => {
      await pglite.close();
      await release();
    },
  };
}

/**
 * PGlite is single-process: two processes on one data dir corrupt it silently, so an exclusive lock
 * file is taken first. A first-time data dir is made in a temporary folder that is renamed into
 * place, so a crash cannot leave a half-made one: a checked copy of `template` when it is usable,
 * else initdb.
 */
async function openPgliteDir(driver: PgliteDriver, dir: string, template?: string): Promise<Database> {
  const startParams = pgliteStartParams(driver.PGlite);
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const release = takeLock(`${dir}.lock`);
  try {
    let created: Database['created'];
    if (!fs.existsSync(dir)) {
      const tmp = `${dir}.init-${process.pid}`;
      fs.rmSync(tmp, { recursive: true, force: true });
      const problem = template ? copyTemplate(template, tmp) : 'no template given';
      if (problem) {
        const fresh = await driver.PGlite.create(tmp, { startParams });
        await fresh.close();
      }
      fs.renameSync(tmp, dir);
      created = problem ? { from: 'initdb', reason: problem } : { from: 'template' };
    }
    const pglite = await driver.PGlite.create(dir, { startParams });
    return { ...wrapPglite(driver, pglite, async () => release()), ...(created && { created }) };
  } catch (err) {
    release();
    throw err;
  }
}

function takeLock(lockPath: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      return () => fs.rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(fs.readFileSync(lockPath, 'utf8'));
      if (Number.isInteger(holder) && holder > 0 && isAlive(holder)) {
        throw new Error(
          `The embedded database in ${path.dirname(lockPath)} is in use by process ${holder}. ` +
            'PGlite allows one process; use DATABASE_URL=postgres://... for several processes.',
        );
      }
      fs.rmSync(lockPath, { force: true }); // stale lock of a dead process
    }
  }
  throw new Error(`Could not take the lock ${lockPath}`);
}

/** Whether a process with this pid exists (one of another user's counts: EPERM). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `fn` holding a session advisory lock (`key`) on a connection of its own, outside the pool, so
 * that several processes starting together do one thing once (pg-boss's install, the demo account).
 * PGlite: at once (one process holds it).
 */
export async function withAdvisoryLock<T>(database: Database, key: number, fn: () => Promise<T>): Promise<T> {
  if (!database.pool) return fn();
  // No statement timeout: waiting for the lock may take as long as another process's work.
  const options = database.pool.options as pg.ClientConfig;
  const client = new pg.Client({ ...options, statement_timeout: false, query_timeout: 0 });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [key]);
    return await fn();
  } finally {
    // Ending the session releases the lock.
    await client.end().catch(() => {});
  }
}

/** The row type of a select projection (nullable columns stay nullable). */
export type RowOf<T> = SelectResultFields<T>;

/** /readyz: the database answers a query (throws when it does not). */
export async function ping(db: Db): Promise<void> {
  await db.execute(sql`select 1`);
}

/**
 * A hot statement of fixed text (`$1`-style parameters), run as a named prepared statement on
 * PostgreSQL: each pooled connection parses and plans it once, and no query is built per call
 * (Drizzle's SQL building costs more than the round trip's own CPU here). Null on PGlite or inside a
 * transaction handle: the caller then runs its Drizzle form.
 */
export async function preparedRows<T>(
  db: Db,
  name: string,
  text: string,
  values: unknown[],
): Promise<T[] | null> {
  const client = (db as { $client?: unknown }).$client;
  if (!(client instanceof pg.Pool)) return null;
  const result = await client.query<T & pg.QueryResultRow>({ name, text, values });
  return result.rows;
}

/** Runs raw SQL and returns its rows (both drivers answer `{ rows }`). Values stay parameterised. */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as { rows: T[] };
  return result.rows;
}
