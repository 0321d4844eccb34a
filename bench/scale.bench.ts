/**
 * Issue 14: one account's reads on a small and a large database (PostgreSQL). Both databases get the
 * same shape of account (bench/scale-seed.ts); the large one has SCALE × the full size (10,000
 * accounts, 100,000 sites, 300,000 installs, 1,000,000 domains, 5,000,000 operations and backups)
 * around it. For each of listSites, getInstall, listInstalls, listDomains, listBackups and
 * getOperation, and a deep page (listSites offset 10,000 of a 20,000-site account), the real server
 * (read cache off, so each request runs its SQL) answers REQUESTS sequential requests: p50 and p99.
 * EXPLAIN (ANALYZE, BUFFERS) of each list statement goes to bench/results/scale-explain-<size>.txt.
 *
 *   npx tsx bench/scale.bench.ts [SCALE=0.1] [REQUESTS=200]
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { openConfiguredDatabase } from '../src/main.js';
import { BENCH_PG_URL, ownerAuthorization, withServices } from './databases.js';
import { percentile, startServer } from './load.js';
import { accountId, BIG_ACCOUNT, countsFor, seedScale, uuidOf } from './scale-seed.js';

const RESULTS = fileURLToPath(new URL('results/', import.meta.url));
const MEASURED = 7; // account number 7: 10 sites, 30 installs

async function admin<T>(fn: (c: pg.Client) => Promise<T>) {
  const c = new pg.Client({ connectionString: `${BENCH_PG_URL}/postgres` });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

function env(dataDir: string, url: string): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    RATE_LIMIT_PER_MINUTE: '0',
    AUTH_CACHE_SECONDS: '3600',
    READ_CACHE_ENTRIES: '0',
    LOG_LEVEL: 'silent',
    HOSTPLANE_ADMIN_TOKEN: randomBytes(24).toString('hex'),
    DATABASE_URL: url,
    REDIS_URL: '',
    PUBLIC_URL: '',
  };
}

/** Adds an owner of the measured and the large account. */
function owners(e: Record<string, string>) {
  return withServices(e, (services) =>
    ownerAuthorization(services, [accountId(MEASURED), BIG_ACCOUNT], 'scale'),
  );
}

const EXPLAINS = (install: string) =>
  [
    ...(
      [
        ['listSites', accountId(MEASURED), 0],
        ['listSites deep page (offset 10,000)', BIG_ACCOUNT, 10_000],
      ] as const
    ).map(
      ([label, account, offset]) =>
        [
          label,
          // The statement of sites.repo.ts listSitesWithInstalls: the page's ids first (index only).
          `select s.id, s.name, (select count(*) from sites where account_id = $1) as total,
       coalesce((select json_agg(json_build_object('id', i.id, 'name', i.name) order by i.created_at, i.id)
         from installs i where i.site_id = s.id and i.account_id = $1), '[]'::json)
     from sites s where s.id = any(array(select id from sites where account_id = $1 order by created_at, id
       limit 100 offset ${offset}))
     order by s.created_at, s.id`,
          [account],
        ] as const,
    ),
    [
      'listInstalls',
      `select * from installs where account_id = $1 order by created_at, id limit 100 offset 0`,
      [accountId(MEASURED)],
    ],
    ['listInstalls count', `select count(*) from installs where account_id = $1`, [accountId(MEASURED)]],
    [
      'listDomains',
      `select * from domains where install_id = $1 order by created_at, id limit 100 offset 0`,
      [install],
    ],
    ['listDomains count', `select count(*) from domains where install_id = $1`, [install]],
    [
      'listBackups',
      `select * from backups where install_id = $1 order by create_time desc, id desc limit 100 offset 0`,
      [install],
    ],
    ['listBackups count', `select count(*) from backups where install_id = $1`, [install]],
    ['getOperation', `select * from operations where id = $1`, [uuidOf(`o${(MEASURED - 1) * 30 + 1}`)]],
    ['getInstall', `select * from installs where id = $1`, [install]],
  ] as const;

async function measure(url: string, authorization: string, n: number) {
  for (let i = 0; i < 10; i++) await fetch(url, { headers: { authorization } }).then((r) => r.arrayBuffer());
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const began = performance.now();
    const res = await fetch(url, { headers: { authorization } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    times.push(performance.now() - began);
  }
  const sorted = Float64Array.from(times).sort();
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
}

async function one(size: 'small' | 'large', scale: number, n: number) {
  const name = `hp_scale_${size}_${randomBytes(4).toString('hex')}`;
  await admin((c) => c.query(`create database ${name}`));
  const url = `${BENCH_PG_URL}/${name}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `hp-scale-${size}-`));
  try {
    const e = env(dataDir, url);
    // Opening the database the way the app does migrates it.
    await (await openConfiguredDatabase(loadConfig(e))).close();
    const counts = countsFor(size === 'small' ? 10 / 10_000 : scale);
    console.log(`== ${size}: ${JSON.stringify(counts)}`);
    const began = performance.now();
    await seedScale(url, counts);
    const seedSeconds = (performance.now() - began) / 1000;
    const authorization = await owners(e);
    const install = uuidOf(`i${(MEASURED - 1) * 30 + 1}`);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const explains: string[] = [];
    for (const [label, sql, params] of EXPLAINS(install)) {
      const plan = await client.query(`explain (analyze, buffers) ${sql}`, [...params]);
      explains.push(`-- ${label}\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
    }
    await client.end();
    fs.mkdirSync(RESULTS, { recursive: true });
    fs.writeFileSync(path.join(RESULTS, `scale-explain-${size}.txt`), explains.join('\n'));
    const server = await startServer('app', { ...e }, []);
    const origin = new URL(server.url).origin;
    const operation = uuidOf(`o${(MEASURED - 1) * 30 + 1}`);
    const calls: [string, string][] = [
      ['listSites', `/v1/sites?account_id=${accountId(MEASURED)}`],
      ['getInstall', `/v1/installs/${install}`],
      ['listInstalls', `/v1/installs?account_id=${accountId(MEASURED)}`],
      ['listDomains', `/v1/installs/${install}/domains`],
      ['listBackups', `/v1/installs/${install}/backups`],
      ['getOperation', `/v1/operations/${operation}`],
      ['listSites offset 10,000 (20,000-site account)', `/v1/sites?account_id=${BIG_ACCOUNT}&offset=10000`],
    ];
    const out: Record<string, { p50: number; p99: number }> = {};
    try {
      for (const [label, p] of calls) {
        out[label] = await measure(`${origin}${p}`, authorization, n);
        console.log(
          `   ${label.padEnd(48)} p50 ${out[label]?.p50.toFixed(2)} ms  p99 ${out[label]?.p99.toFixed(2)} ms`,
        );
      }
    } finally {
      await server.stop();
    }
    return { counts, seedSeconds, out };
  } finally {
    await admin((c) => c.query(`drop database if exists ${name} with (force)`));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  const scale = Number(process.argv[2] ?? 0.1);
  const n = Number(process.argv[3] ?? 200);
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const small = await one('small', scale, n);
  const large = await one('large', scale, n);
  const uptimeAfter = execFileSync('uptime').toString().trim();
  const rows = Object.keys(small.out).map((label) => {
    const s = small.out[label];
    const l = large.out[label];
    return `| ${label} | ${s?.p50.toFixed(2)} | ${s?.p99.toFixed(2)} | ${l?.p50.toFixed(2)} | ${l?.p99.toFixed(2)} | ${((l?.p50 ?? 0) / (s?.p50 ?? 1)).toFixed(2)} |`;
  });
  const report = [
    '# One account on a small vs a large database: last results',
    '',
    `${new Date().toISOString()} · Node ${process.version} · SCALE=${scale} · ${n} sequential requests per call, read cache off`,
    '',
    `large: ${JSON.stringify(large.counts)} (seeded in ${large.seedSeconds.toFixed(0)} s); small: ${JSON.stringify(small.counts)}`,
    '',
    `uptime before: \`${uptimeBefore}\` · after: \`${uptimeAfter}\``,
    '',
    '| call (one account: 10 sites, 30 installs) | small p50 ms | small p99 ms | large p50 ms | large p99 ms | large / small p50 |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(RESULTS, 'scale.md'), report);
  console.log(`\n${report}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
