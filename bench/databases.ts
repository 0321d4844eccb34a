import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createJobQueue } from '../src/jobs/queue.js';
import { openConfiguredDatabase } from '../src/main.js';
import { loadOrCreateSecret } from '../src/secrets.js';
import { createServices, type Services } from '../src/services.js';

export type DbKind = 'pglite' | 'postgres';

/** Server URL (no database name) of the PostgreSQL the bench uses; trust auth on loopback. */
export const BENCH_PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';

/** How many sites the measured account owns (one install each): exactly one full page. */
export const SITES = 100;

/** A database to benchmark on: the environment the servers get, and how to remove it. */
export interface Target {
  kind: DbKind;
  /** Configuration for `loadConfig` in the bench (seeding). */
  env: Record<string, string>;
  /**
   * Configuration for one server process, after seeding. Each server gets its own DATA_DIR; on
   * PGlite that is a copy of the seeded one, because PGlite allows one process per data dir.
   */
  serverEnv(name: string): Record<string, string>;
  /** e.g. `PostgreSQL 15.14` or `PGlite 0.5.16`. */
  version: string;
  drop(): Promise<void>;
}

/** The measured account and an owner credential on it. */
export interface Fixture {
  accountId: string;
  authorization: string;
}

function withDatabase(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function onServer<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(BENCH_PG_URL, 'postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Settings shared by every server under test: loopback, any free port, no rate limit, long auth cache. */
function baseEnv(dataDir: string): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    RATE_LIMIT_PER_MINUTE: '0',
    AUTH_CACHE_SECONDS: '3600',
    LOG_LEVEL: 'silent',
    // Set so that nothing is generated into DATA_DIR; the admin API is not measured.
    HOSTPLANE_ADMIN_TOKEN: randomBytes(24).toString('hex'),
    DATABASE_URL: '',
    REDIS_URL: '',
    PUBLIC_URL: '',
  };
}

/** PGlite in a fresh DATA_DIR under `workDir`, or a throwaway `hp_bench_*` database; `drop` removes `workDir` too. */
export async function prepareTarget(kind: DbKind, workDir: string): Promise<Target> {
  const dataDir = path.join(workDir, kind);
  fs.mkdirSync(dataDir, { recursive: true });
  const env = baseEnv(dataDir);
  const serverDir = (name: string, copy: boolean) => {
    const dir = path.join(workDir, `${kind}-${name}`);
    if (copy) fs.cpSync(dataDir, dir, { recursive: true });
    else fs.mkdirSync(dir, { recursive: true });
    return dir;
  };
  if (kind === 'pglite') {
    const manifest = new URL('../node_modules/@electric-sql/pglite/package.json', import.meta.url);
    const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string };
    return {
      kind,
      env,
      serverEnv: (name) => ({ ...env, DATA_DIR: serverDir(name, true) }),
      version: `PGlite ${version}`,
      drop: async () => fs.rmSync(workDir, { recursive: true, force: true }),
    };
  }
  const name = `hp_bench_${randomBytes(6).toString('hex')}`;
  const version = await onServer(async (c) => {
    await c.query(`create database ${name}`);
    const res = await c.query<{ server_version: string }>('show server_version');
    return `PostgreSQL ${res.rows[0]?.server_version ?? '?'}`;
  });
  const pgEnv = { ...env, DATABASE_URL: withDatabase(BENCH_PG_URL, name) };
  return {
    kind,
    env: pgEnv,
    serverEnv: (server) => ({ ...pgEnv, DATA_DIR: serverDir(server, false) }),
    version,
    drop: async () => {
      await onServer((c) => c.query(`drop database if exists ${name} with (force)`));
      fs.rmSync(workDir, { recursive: true, force: true });
    },
  };
}

/**
 * PostgreSQL: a copy of the target's database (seeded, with no session open on it) for one run, so
 * every run starts from the same rows; `drop` removes the copy.
 */
export async function cloneDatabase(target: Target): Promise<{ url: string; drop(): Promise<void> }> {
  const source = new URL(target.env.DATABASE_URL ?? '').pathname.slice(1);
  if (target.kind !== 'postgres' || !source) throw new Error('cloneDatabase: a PostgreSQL target only');
  const name = `${source}_${randomBytes(3).toString('hex')}`;
  await onServer((c) => c.query(`create database ${name} template ${source}`));
  return {
    url: withDatabase(BENCH_PG_URL, name),
    drop: async () => {
      await onServer((c) => c.query(`drop database if exists ${name} with (force)`));
    },
  };
}

/**
 * Runs `fn` with the services of the database `env` configures (migrated, queue started), then
 * closes both again, so that a server can open the database afterwards (PGlite allows one process).
 */
export async function withServices<T>(env: Record<string, string>, fn: (services: Services) => Promise<T>) {
  const config = loadConfig(env);
  const database = await openConfiguredDatabase(config);
  const queue = createJobQueue({ database, jobs: config.jobs });
  await queue.start();
  try {
    const secretKey = loadOrCreateSecret(config.secretKey, config.dataDir, 'secret-key').value;
    return await fn(createServices({ config, database, clock: systemClock, secretKey, queue }));
  } finally {
    await queue.stop();
    await database.close();
  }
}

/** A new user owning `accountIds`, with an API credential: its `Authorization: Basic ...` header. */
export async function ownerAuthorization(services: Services, accountIds: string[], label: string) {
  const user = await services.users.create({
    email: `${label}-${randomBytes(4).toString('hex')}@bench.hostplane.test`,
    first_name: 'Bench',
    last_name: 'Owner',
    memberships: accountIds.map((id) => ({ account_id: id, roles: 'owner' })),
  });
  const credential = await services.users.issueCredential(user.id);
  return `Basic ${Buffer.from(`${credential.username}:${credential.password}`).toString('base64')}`;
}

/**
 * Migrates the target and seeds it through the service layer: one account with {@link SITES} sites,
 * one production install each, and an owner with an API credential. The database is closed again
 * before any server opens it (PGlite allows one process).
 */
export function seed(target: Target): Promise<Fixture> {
  return withServices(target.env, async (services) => {
    const account = await services.accounts.create({
      name: 'Bench Agency',
      preferred_data_center: 'us-central',
    });
    for (let n = 0; n < SITES; n++) {
      const site = await services.sites.adminCreate({
        account_id: account.id,
        name: `Bench site ${n}`,
        group_name: `Group ${n % 5}`,
        tags: ['bench', `t${n % 7}`],
      });
      await services.installs.adminCreate({
        account_id: account.id,
        site_id: site.id,
        name: `bench${String(n).padStart(3, '0')}${randomBytes(2).toString('hex')}`,
        environment: 'production',
      });
    }
    return {
      accountId: account.id,
      authorization: await ownerAuthorization(services, [account.id], 'owner'),
    };
  });
}
