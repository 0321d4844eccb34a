import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { SQL } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import type { SelectResultFields } from 'drizzle-orm/query-builders/select.types';
import pg from 'pg';
import { schema } from './schema.js';

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
  close(): Promise<void>;
}

export type DbOptions =
  | { kind: 'postgres'; url: string; poolSize?: number }
  | { kind: 'pglite'; dir: string }
  | { kind: 'pglite-memory'; loadDataDir?: Blob };

/** Opens PostgreSQL through a pg pool, or PGlite (in a data dir or in memory). */
export async function openDatabase(options: DbOptions): Promise<Database> {
  if (options.kind === 'postgres') return openPostgres(options.url, options.poolSize ?? 10);
  if (options.kind === 'pglite-memory') {
    const pglite = await PGlite.create(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {});
    return wrapPglite(pglite, async () => {});
  }
  return openPgliteDir(options.dir);
}

function openPostgres(url: string, max: number): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // G11: fail fast when the database is unreachable instead of queueing requests forever.
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    statement_timeout: 15_000,
    // A connection that stays open but no longer answers (a frozen network path) would hang its
    // query forever: the client gives up a little after the server-side statement timeout.
    query_timeout: 20_000,
    keepAlive: true,
  });
  // An idle client that loses its connection emits here; without a listener the process would crash.
  pool.on('error', () => {});
  return {
    kind: 'postgres',
    db: drizzlePg(pool, { schema }) as unknown as Db,
    pool,
    close: () => pool.end(),
  };
}

function wrapPglite(pglite: PGlite, release: () => Promise<void>): Database {
  return {
    kind: 'pglite',
    db: drizzlePglite(pglite, { schema }) as unknown as Db,
    pglite,
    close: async () => {
      await pglite.close();
      await release();
    },
  };
}

/**
 * PGlite is single-process: two processes on one data dir corrupt it silently, so an exclusive lock
 * file is taken first. A first-time init runs in a temporary folder that is renamed into place, so a
 * crash during initdb cannot leave a half-made data dir.
 */
async function openPgliteDir(dir: string): Promise<Database> {
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const release = takeLock(`${dir}.lock`);
  try {
    if (!fs.existsSync(dir)) {
      const tmp = `${dir}.init-${process.pid}`;
      fs.rmSync(tmp, { recursive: true, force: true });
      const fresh = await PGlite.create(tmp);
      await fresh.close();
      fs.renameSync(tmp, dir);
    }
    const pglite = await PGlite.create(dir);
    return wrapPglite(pglite, async () => release());
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The row type of a select projection (nullable columns stay nullable). */
export type RowOf<T> = SelectResultFields<T>;

/** Runs raw SQL and returns its rows (both drivers answer `{ rows }`). Values stay parameterised. */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as { rows: T[] };
  return result.rows;
}
