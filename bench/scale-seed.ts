/**
 * Issue 14: seeds a PostgreSQL database at scale with set-based SQL (generate_series), for
 * bench/scale.bench.ts. Full size (SCALE=1): 10,000 accounts, 100,000 sites (10 per account),
 * 300,000 installs (3 per site), 1,000,000 domains, 5,000,000 operations and 5,000,000 backups
 * (spread evenly over the installs); plus one "large" account with BIG_SITES sites, for deep pages.
 * SCALE < 1 shrinks every count but keeps each account the same shape (so one account's calls are
 * comparable across sizes): 10 sites, 30 installs, ~100 domains, ~500 operations and backups.
 *
 *   npx tsx bench/scale-seed.ts postgres://…/db 0.1      (10 % of the full size)
 *
 * Triggers (data versions) and foreign-key checks are skipped while seeding
 * (session_replication_role = replica): the rows are consistent by construction.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';

export interface ScaleCounts {
  accounts: number;
  sites: number;
  installs: number;
  domains: number;
  operations: number;
  backups: number;
  bigSites: number;
}

export function countsFor(scale: number, bigSites = 20_000): ScaleCounts {
  const accounts = Math.max(1, Math.round(10_000 * scale));
  return {
    accounts,
    sites: accounts * 10,
    installs: accounts * 30,
    domains: Math.round(accounts * 100),
    operations: accounts * 500,
    backups: accounts * 500,
    bigSites,
  };
}

/** The id of account number n (1-based), as the seed writes it. */
export const accountId = (n: number) => uuidOf(`a${n}`);
export const BIG_ACCOUNT = 'b16ac000-0000-4000-8000-000000000000';

/** md5(text)::uuid, as the SQL computes it. */
export function uuidOf(text: string): string {
  const h = createHash('md5').update(text).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export async function seedScale(url: string, counts: ScaleCounts, log = console.log) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const step = async (what: string, sql: string) => {
    const began = performance.now();
    await client.query(sql);
    log(`   ${what}: ${((performance.now() - began) / 1000).toFixed(1)} s`);
  };
  try {
    await client.query(`set session_replication_role = replica; set statement_timeout = 0`);
    const { accounts, sites, installs, domains, operations, backups, bigSites } = counts;
    // Sites: 10 per account; installs: 3 per site (production, staging, development).
    await step(
      `${accounts} accounts`,
      `insert into accounts (id, name) select md5('a' || g)::uuid, 'Scale account ' || g from generate_series(1, ${accounts}) g`,
    );
    await step(
      `${sites} sites`,
      `insert into sites (id, account_id, name, created_at)
       select md5('s' || g)::uuid, md5('a' || ((g - 1) / 10 + 1))::uuid, 'Site ' || g,
              timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${sites}) g`,
    );
    await step(
      `${installs} installs`,
      `insert into installs (id, account_id, site_id, name, environment, status, php_version, created_at)
       select md5('i' || g)::uuid, md5('a' || ((g - 1) / 30 + 1))::uuid, md5('s' || ((g - 1) / 3 + 1))::uuid,
              'scale' || g, (array['production', 'staging', 'development'])[(g - 1) % 3 + 1], 'active', '8.2',
              timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${installs}) g`,
    );
    // Domains, operations, backups: spread round-robin over the installs (install = (g-1) % installs + 1).
    const installOf = (g: string) => `((${g} - 1) % ${installs} + 1)`;
    const accountOfInstall = (i: string) => `md5('a' || ((${i} - 1) / 30 + 1))::uuid`;
    await step(
      `${domains} domains`,
      `insert into domains (install_id, name, created_at)
       select md5('i' || ${installOf('g')})::uuid, 'd' || g || '.scale.test', timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${domains}) g`,
    );
    await step(
      `${operations} operations`,
      `insert into operations (id, account_id, install_id, type, status, resource_type, resource_id, created_at, started_at, completed_at)
       select md5('o' || g)::uuid, ${accountOfInstall(installOf('g'))}, md5('i' || ${installOf('g')})::uuid,
              'create_backup', 'completed', 'backup', md5('b' || g)::uuid,
              timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01' + g * interval '1 second',
              timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${operations}) g`,
    );
    await step(
      `${backups} backups`,
      `insert into backups (id, account_id, install_id, operation_id, status, description, create_time, complete_time)
       select md5('b' || g)::uuid, ${accountOfInstall(installOf('g'))}, md5('i' || ${installOf('g')})::uuid,
              case when g <= ${operations} then md5('o' || g)::uuid end, 'completed', 'Scale backup ' || g,
              timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${backups}) g`,
    );
    await step(
      `large account with ${bigSites} sites`,
      `insert into accounts (id, name) values ('${BIG_ACCOUNT}', 'Scale large account');
       insert into sites (id, account_id, name, created_at)
       select md5('big' || g)::uuid, '${BIG_ACCOUNT}', 'Big site ' || g, timestamptz '2026-01-01' + g * interval '1 second'
       from generate_series(1, ${bigSites}) g`,
    );
    await step('vacuum analyze', 'vacuum analyze');
  } finally {
    await client.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [url, scale] = process.argv.slice(2);
  if (!url) throw new Error('usage: scale-seed.ts POSTGRES_URL [SCALE]');
  await seedScale(url, countsFor(Number(scale ?? 1)));
}
