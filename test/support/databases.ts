import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { type Database, type Db, isAlive, openDatabase, queryRows } from '../../src/db/client.js';
import { migrateDatabase } from '../../src/db/migrate.js';
import { createJobQueue } from '../../src/jobs/queue.js';

/** Which database the API tests run on: `TEST_DB=pglite` (default) or `TEST_DB=postgres`. */
export const TEST_DB = (process.env.TEST_DB ?? 'pglite') as 'pglite' | 'postgres';
/** Server URL (without a database name) for TEST_DB=postgres. */
export const TEST_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';
/** One id per `npm test` run (scripts/test.sh), so concurrent runs never share a template. */
const RUN_ID = (process.env.TEST_RUN_ID ?? 'local').replace(/[^a-z0-9_]/gi, '').toLowerCase();
export const TEMPLATE_DB = `hp_tpl_${RUN_ID}`;
/**
 * PGlite's clones are data dirs on disk, as a server's are (db/client.ts `kind: 'pglite'`): a copy of
 * the run's migrated template dir, in tmpfs where there is one. Loading a gzipped dump into PGlite's
 * in-memory file system instead cost ~1.2 CPU-s per test file (untar into the WASM heap's files, kept
 * as JS arrays the GC then walks) against ~0.7 s for a copy and an open (docs/decisions.md #124).
 */
const CLONES = path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), `hostplane-test-${RUN_ID}`);
export const PGLITE_TEMPLATE = path.join(CLONES, 'template');

function dbUrl(name: string): string {
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: dbUrl('postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The job queue's schema and queues, so clones start with them (pg-boss installs them on start). */
async function installQueue(database: Database) {
  const queue = createJobQueue({ database, jobs: loadConfig({}).jobs });
  await queue.start();
  await queue.stop();
}

/** The clone folders of runs whose scripts/test.sh (`r<pid>`) is gone: killed runs leave them in tmpfs. */
function removeStaleClones() {
  const base = path.dirname(CLONES);
  for (const name of fs.readdirSync(base)) {
    const pid = Number(/^hostplane-test-r(\d+)$/.exec(name)?.[1]);
    if (!pid || isAlive(pid)) continue;
    fs.rmSync(path.join(base, name), { recursive: true, force: true });
  }
}

/** Once per test run (scripts/test.sh): a migrated template that each test file clones. */
export async function prepareTemplate(): Promise<void> {
  if (TEST_DB === 'postgres') {
    await admin(async (c) => {
      await c.query(`drop database if exists ${TEMPLATE_DB} with (force)`);
      await c.query(`create database ${TEMPLATE_DB}`);
    });
    const database = await openDatabase({ kind: 'postgres', url: dbUrl(TEMPLATE_DB), poolSize: 1 });
    await migrateDatabase(database);
    await installQueue(database);
    await database.close();
    return;
  }
  removeStaleClones();
  fs.rmSync(CLONES, { recursive: true, force: true });
  fs.mkdirSync(CLONES, { recursive: true });
  const database = await openDatabase({ kind: 'pglite', dir: PGLITE_TEMPLATE });
  await migrateDatabase(database);
  await installQueue(database);
  await database.close();
}

/** End of a run: drop the template (test files drop their own clones). */
export async function dropTemplate(): Promise<void> {
  if (TEST_DB === 'postgres')
    await admin((c) => c.query(`drop database if exists ${TEMPLATE_DB} with (force)`));
  else fs.rmSync(CLONES, { recursive: true, force: true });
}

/** A fresh, migrated database for one test file (a clone of the template). */
export async function cloneDatabase(): Promise<{
  database: Database;
  url?: string;
  drop: () => Promise<void>;
}> {
  if (TEST_DB === 'postgres') {
    const name = `hp_test_${randomBytes(6).toString('hex')}`;
    await admin((c) => c.query(`create database ${name} template ${TEMPLATE_DB}`));
    const url = dbUrl(name);
    const database = await openDatabase({ kind: 'postgres', url, poolSize: 5 });
    return {
      database,
      url,
      drop: async () => {
        await database.close().catch(() => {});
        await admin((c) => c.query(`drop database if exists ${name} with (force)`));
      },
    };
  }
  const dir = path.join(CLONES, `clone-${randomBytes(6).toString('hex')}`);
  fs.cpSync(PGLITE_TEMPLATE, dir, { recursive: true });
  const database = await openDatabase({ kind: 'pglite', dir });
  return {
    database,
    drop: async () => {
      await database.close().catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Issue 22: the rows of every table of the database (the app's and the job engine's), by
 * `schema.table`: a dry run leaves every count as it was.
 */
export async function rowCounts(db: Db): Promise<Record<string, number>> {
  const tables = await queryRows<{ schema: string; name: string }>(
    db,
    sql`select table_schema as schema, table_name as name from information_schema.tables
        where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')
        order by 1, 2`,
  );
  // One statement for every table (a count each, `union all`): ~60 statements were a dry-run
  // test's largest cost on PGlite.
  const counts: Record<string, number> = {};
  if (tables.length === 0) return counts;
  const parts = tables.map(
    ({ schema, name }) =>
      sql`select ${`${schema}.${name}`} as t, count(*)::int as n from ${sql.identifier(schema)}.${sql.identifier(name)}`,
  );
  const rows = await queryRows<{ t: string; n: number }>(db, sql.join(parts, sql` union all `));
  for (const { schema, name } of tables) counts[`${schema}.${name}`] = 0;
  for (const row of rows) counts[row.t] = Number(row.n);
  return counts;
}
