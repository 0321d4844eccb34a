/**
 * Latency of the account usage routes at scale (issue 12): `GET /v1/accounts/{id}/usage/insights` and
 * `/usage/summary` for a 31-day window, on an account with 1,000 installs and two years of daily rows
 * (730,000 rows), among several such accounts, on PGlite and PostgreSQL.
 *
 *   npm run bench:usage               both databases
 *   npm run bench:usage -- postgres   one of pglite, postgres
 *
 * Sizes: BENCH_USAGE_ACCOUNTS (3), BENCH_USAGE_INSTALLS (1000), BENCH_USAGE_DAYS (730).
 * BENCH_USAGE_INDEX=<create index ...> adds an index after seeding (to compare designs).
 *
 * Seeding is SQL (generate_series), in date-major order as daily ingestion writes it (each day's rows
 * of every install together, the worst order for a per-install range scan). Before any load, the
 * bench writes EXPLAIN (ANALYZE, BUFFERS) of both statements to results/usage-explain-<db>.txt.
 * Then the real server (`hostplane serve` in its own process) is measured with autocannon: one
 * connection (latency), then 8 (throughput). Writes results/usage-<databases>.{md,json}. See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { type Database, queryRows } from '../src/db/client.js';
import { createJobQueue } from '../src/jobs/queue.js';
import { openConfiguredDatabase } from '../src/main.js';
import { insightsQuery, summaryQuery } from '../src/modules/usage/usage.account.repo.js';
import { isoDate } from '../src/modules/usage/usage-range.js';
import { loadOrCreateSecret } from '../src/secrets.js';
import { createServices } from '../src/services.js';
import { type DbKind, ownerAuthorization, prepareTarget, type Target } from './databases.js';
import { percentile, run, startServer, verify } from './load.js';
import { SEED_INSTALLS, SEED_USAGE } from './usage-seed.js';

const RESULTS = fileURLToPath(new URL('results/', import.meta.url));
const intEnv = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const ACCOUNTS = intEnv('BENCH_USAGE_ACCOUNTS', 3);
const INSTALLS = intEnv('BENCH_USAGE_INSTALLS', 1000);
const DAYS = intEnv('BENCH_USAGE_DAYS', 730);
const EXTRA_INDEX = process.env.BENCH_USAGE_INDEX ?? '';
const LOADS = [
  { connections: 1, warmupSeconds: 2, seconds: 10 },
  { connections: 8, warmupSeconds: 1, seconds: 5 },
];
const DAY_MS = 86_400_000;

interface Fixture {
  accountId: string;
  authorization: string;
  first: string;
  last: string;
  seedSeconds: number;
  rows: number;
}

interface Row {
  db: DbKind;
  route: string;
  connections: number;
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  loadAverage: number;
}

/**
 * A seeding statement on its own connection, without the pool's timeouts (15 s statement_timeout,
 * 20 s client query_timeout): 730,000 rows take longer than that on a busy machine.
 */
async function unbounded(database: Database, url: string, text: string, params: unknown[] = []) {
  if (database.pglite) {
    await database.pglite.query(text, params);
    return;
  }
  if (!database.pool) throw new Error('database has neither a pg pool nor a PGlite handle');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('set statement_timeout = 0');
    await client.query(text, params);
  } finally {
    await client.end();
  }
}

async function seedUsage(target: Target, explainFile: string): Promise<Fixture> {
  const config = loadConfig(target.env);
  const database = await openConfiguredDatabase(config);
  const queue = createJobQueue({ database, jobs: config.jobs });
  await queue.start();
  const started = Date.now();
  const url = target.env.DATABASE_URL ?? '';
  try {
    const secretKey = loadOrCreateSecret(config.secretKey, config.dataDir, 'secret-key').value;
    const services = createServices({ config, database, clock: systemClock, secretKey, queue });
    const db = database.db;
    const today = Date.now();
    const last = isoDate(new Date(today));
    const seedFirst = isoDate(new Date(today - (DAYS - 1) * DAY_MS));
    const accountIds: string[] = [];
    for (let a = 0; a < ACCOUNTS; a++) {
      const account = await services.accounts.create({ name: `Usage bench ${a}` });
      accountIds.push(account.id);
      const t0 = Date.now();
      await unbounded(database, url, SEED_INSTALLS, [account.id, INSTALLS]);
      await unbounded(database, url, SEED_USAGE, [account.id, seedFirst, last]);
      console.log(
        `   account ${a + 1}/${ACCOUNTS}: ${INSTALLS} installs x ${DAYS} days in ${(Date.now() - t0) / 1000} s`,
      );
    }
    await unbounded(database, url, 'vacuum analyze');
    if (EXTRA_INDEX) {
      await unbounded(database, url, EXTRA_INDEX);
      await unbounded(database, url, 'vacuum analyze');
    }
    const seedSeconds = (Date.now() - started) / 1000;
    const [count] = await queryRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from install_usage_daily`,
    );
    const accountId = accountIds[Math.floor(ACCOUNTS / 2)] ?? '';
    const first = isoDate(new Date(today - 30 * DAY_MS));
    const scope = { accountId, installIds: null };
    const plans: string[] = [
      `-- ${target.version}; ${count?.n} usage rows; extra index: ${EXTRA_INDEX || 'none'}`,
    ];
    for (const [name, query] of [
      ['insights', insightsQuery(scope, first, last)],
      ['summary', summaryQuery(scope, first, last)],
    ] as const) {
      await db.execute(query); // warm the cache: the server runs it many times
      const rows = await queryRows<Record<string, string>>(db, sql`explain (analyze, buffers) ${query}`);
      plans.push(`\n-- ${name} (${first} .. ${last})`, ...rows.map((r) => Object.values(r)[0] ?? ''));
    }
    fs.mkdirSync(RESULTS, { recursive: true });
    fs.writeFileSync(explainFile, `${plans.join('\n')}\n`);
    const authorization = await ownerAuthorization(services, accountIds, 'usage-bench');
    return { accountId, authorization, first, last, seedSeconds, rows: count?.n ?? 0 };
  } finally {
    await queue.stop();
    await database.close();
  }
}

const checkInsights = (body: unknown) =>
  typeof (body as { visit_count?: { total?: unknown } }).visit_count?.total === 'string'
    ? null
    : 'visit_count.total is not a string';
const checkSummary = (body: unknown) =>
  typeof (body as { visit_count?: { sum?: unknown } }).visit_count?.sum === 'string'
    ? null
    : 'visit_count.sum is not a string';

async function benchDatabase(db: DbKind, meta: Record<string, unknown>[]): Promise<Row[]> {
  console.log(`== ${db}: seeding ${ACCOUNTS} accounts x ${INSTALLS} installs x ${DAYS} days`);
  const target = await prepareTarget(db, fs.mkdtempSync(path.join(os.tmpdir(), `hp-bench-usage-${db}-`)));
  const explainFile = path.join(RESULTS, `usage-explain-${db}.txt`);
  const fixture = await seedUsage(target, explainFile).catch(async (err: unknown) => {
    await target.drop();
    throw err;
  });
  meta.push({ db, version: target.version, seedSeconds: fixture.seedSeconds, usageRows: fixture.rows });
  console.log(`   seeded ${fixture.rows} rows in ${fixture.seedSeconds} s; plans in ${explainFile}`);
  const server = await startServer('app', target.serverEnv('app'), []);
  const headers = { authorization: fixture.authorization };
  const rows: Row[] = [];
  try {
    const base = server.url.replace(/\/v1\/.*$/, '');
    const range = `first_date=${fixture.first}&last_date=${fixture.last}`;
    for (const [route, check] of [
      ['insights', checkInsights],
      ['summary', checkSummary],
    ] as const) {
      const url = `${base}/v1/accounts/${fixture.accountId}/usage/${route}?${range}`;
      await verify(url, headers, check);
      for (const load of LOADS) {
        await run(url, headers, load.warmupSeconds, load.connections);
        const r = await run(url, headers, load.seconds, load.connections);
        const sorted = Float64Array.from(r.latenciesMs).sort();
        const row: Row = {
          db,
          route: `GET …/usage/${route} (31 days)`,
          connections: load.connections,
          requests: sorted.length,
          reqPerSec: sorted.length / r.seconds,
          p50Ms: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          errors: r.errors + r.timeouts,
          non2xx: r.non2xx,
          loadAverage: os.loadavg()[0] ?? 0,
        };
        rows.push(row);
        console.log(
          `   ${route} x${load.connections}: p50 ${row.p50Ms} ms, p99 ${row.p99Ms} ms, ${row.reqPerSec.toFixed(1)} req/s`,
        );
      }
    }
    return rows;
  } finally {
    await server.stop();
    await target.drop();
  }
}

function markdown(rows: Row[], meta: Record<string, unknown>[], when: Date, loadBefore: number) {
  return [
    '# Usage insights and summary at scale: last results',
    '',
    `${when.toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} · Node ${process.version}`,
    '',
    `${ACCOUNTS} accounts × ${INSTALLS} installs × ${DAYS} days; the measured account is one of them. ` +
      `Extra index: ${EXTRA_INDEX || 'none'}. 1-minute load average before the start: ${loadBefore.toFixed(1)}.`,
    '',
    '| database | version | usage rows | seed s |',
    '|---|---|---:|---:|',
    ...meta.map((m) => `| ${m.db} | ${m.version} | ${m.usageRows} | ${Number(m.seedSeconds).toFixed(0)} |`),
    '',
    '| database | route | connections | requests | req/s | p50 ms | p99 ms | errors | non-2xx | load avg |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.db} | ${r.route} | ${r.connections} | ${r.requests} | ${r.reqPerSec.toFixed(1)} | ` +
        `${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.errors} | ${r.non2xx} | ${r.loadAverage.toFixed(1)} |`,
    ),
    '',
  ].join('\n');
}

async function main() {
  const wanted = process.argv.slice(2);
  const dbs = (['pglite', 'postgres'] as const).filter((k) => wanted.length === 0 || wanted.includes(k));
  if (dbs.length === 0) throw new Error(`unknown database "${wanted.join(' ')}" (pglite, postgres)`);
  const loadBefore = os.loadavg()[0] ?? 0;
  if (loadBefore > 1)
    console.warn(`Load average is ${loadBefore.toFixed(1)} before the start: expect noise.`);
  const when = new Date();
  const rows: Row[] = [];
  const meta: Record<string, unknown>[] = [];
  for (const db of dbs) rows.push(...(await benchDatabase(db, meta)));
  const report = markdown(rows, meta, when, loadBefore);
  const name = `usage-${dbs.join('-')}`;
  fs.writeFileSync(path.join(RESULTS, `${name}.md`), report);
  const json = { date: when.toISOString(), node: process.version, cpus: os.cpus().length, loadBefore };
  const sizes = { accounts: ACCOUNTS, installs: INSTALLS, days: DAYS, extraIndex: EXTRA_INDEX || null };
  fs.writeFileSync(
    path.join(RESULTS, `${name}.json`),
    `${JSON.stringify({ ...json, sizes, loads: LOADS, databases: meta, rows }, null, 2)}\n`,
  );
  console.log(`\n${report}`);
  if (rows.some((r) => r.errors > 0 || r.non2xx > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
