/**
 * Issue 14: our reads next to the framework's limit and the local stand-ins a developer could run,
 * all in one run, on PostgreSQL and PGlite:
 *   - ours: GET /v1/sites?limit=100 (listSites), GET /v1/installs/{id} (getInstall) and
 *     GET /v1/installs/{id}/domains (listDomains, 20 domains), authenticated as the owner, and a 304
 *     for an unchanged listSites page (If-None-Match);
 *   - bare Fastify serving the very same bytes from memory (bench/server.ts bytes);
 *   - a Prism mock (@stoplight/prism-cli) of our own OpenAPI document (GET /v1/swagger), listSites;
 *   - json-server over the same 100 sites (GET /sites).
 * The peers are installed under bench/peers/ with their own package.json (npm ci there when missing),
 * so the project's install stays lean. 50 connections; every target gets a warm-up, then interleaved
 * rounds. Writes bench/results/peers.{md,json}.
 *
 *   npm run bench:peers               both databases
 *   npm run bench:peers -- postgres   one of pglite, postgres
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { openConfiguredDatabase } from '../src/main.js';
import { type DbKind, prepareTarget, seed, type Target } from './databases.js';
import { cpuSeconds, freePort, percentile, type Run, run, startServer } from './load.js';

const LOAD = { connections: 50, warmupSeconds: 1, rounds: 3, roundSeconds: 2 };
const DOMAINS = 20;
const HERE = fileURLToPath(new URL('.', import.meta.url));
const PEERS = path.join(HERE, 'peers');
const RESULTS = path.join(HERE, 'results');

interface Target_ {
  group: string;
  label: string;
  url: string;
  headers: Record<string, string>;
  pid: number;
  expectStatus: number;
}

interface Row {
  db: DbKind | 'none';
  group: string;
  label: string;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: number;
  /** Answers other than the expected status (200, or 304 for the conditional GET). */
  unexpected: number;
  bytes: number;
  serverCpuMsPerRequest: number | null;
}

interface Stoppable {
  stop(): Promise<void>;
}

async function waitFor(url: string, headers: Record<string, string>, ms = 60_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const res = await fetch(url, { headers });
      if (res.status < 500) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${url} did not answer within ${ms} ms`);
}

/** A peer under bench/peers/node_modules/.bin, on a free port. */
async function startPeer(bin: string, args: (port: number) => string[], probe: string, headers = {}) {
  const port = await freePort();
  const child = spawn(path.join(PEERS, 'node_modules', '.bin', bin), args(port), {
    cwd: PEERS,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitFor(`http://127.0.0.1:${port}${probe}`, headers);
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000);
      }),
  };
}

function ensurePeers() {
  if (fs.existsSync(path.join(PEERS, 'node_modules', '.bin', 'prism'))) return;
  console.log('== installing the peers in bench/peers (npm ci, their own package.json)');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: PEERS, stdio: 'inherit' });
}

/** Adds DOMAINS domains to the first install of the account; returns that install's id. */
async function seedDomains(target: Target, accountId: string): Promise<string> {
  const database = await openConfiguredDatabase(loadConfig(target.env));
  try {
    const sql = `insert into domains (install_id, name)
      select i.id, 'www' || g || '.bench-' || substr(i.id::text, 1, 8) || '.test'
      from (select id from installs where account_id = $1 order by created_at, id limit 1) i,
           generate_series(1, ${DOMAINS}) g
      returning install_id`;
    const rows = database.pool
      ? (await database.pool.query<{ install_id: string }>(sql, [accountId])).rows
      : ((await database.pglite?.query<{ install_id: string }>(sql, [accountId]))?.rows ?? []);
    const id = rows[0]?.install_id;
    if (!id) throw new Error('no install to add domains to');
    return id;
  } finally {
    await database.close();
  }
}

async function provisioned(url: string, headers: Record<string, string>) {
  for (let tries = 0; tries < 600; tries++) {
    const page = (await (await fetch(url, { headers })).json()) as { results: { status: string }[] };
    if (page.results.every((i) => i.status === 'active')) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('installs still provisioning after 5 minutes');
}

async function measure(targets: Target_[]) {
  const { connections, warmupSeconds, rounds, roundSeconds } = LOAD;
  const tallies = targets.map((t) => ({ t, runs: [] as Run[], cpu: 0 as number | null }));
  for (const { t } of tallies) await run(t.url, t.headers, warmupSeconds, connections);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < tallies.length; i++) {
      const tally = tallies[(round + i) % tallies.length];
      if (!tally) continue;
      const before = cpuSeconds(tally.t.pid);
      tally.runs.push(await run(tally.t.url, tally.t.headers, roundSeconds, connections));
      const after = cpuSeconds(tally.t.pid);
      tally.cpu = tally.cpu === null || before === null || after === null ? null : tally.cpu + after - before;
    }
  }
  return tallies;
}

async function bodyOf(url: string, headers: Record<string, string>) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text.slice(0, 200)}`);
  return { text, etag: res.headers.get('etag') ?? '' };
}

async function benchDatabase(db: DbKind, withPeers: boolean): Promise<{ rows: Row[]; version: string }> {
  console.log(`== ${db}: seeding 100 sites, one install each, ${DOMAINS} domains on one install`);
  const target = await prepareTarget(db, fs.mkdtempSync(path.join(os.tmpdir(), `hp-peers-${db}-`)));
  const stoppable: Stoppable[] = [];
  try {
    const fixture = await seed(target);
    const installId = await seedDomains(target, fixture.accountId);
    // Provisioning ends at once, and the bench waits for it: a read cache that is never stale misses
    // on every write, so the data must be at rest while reads are measured.
    const app = await startServer(
      'app',
      { ...target.serverEnv('app'), SIMULATED_DURATIONS: 'provision=0' },
      [],
    );
    stoppable.push(app);
    const origin = new URL(app.url).origin;
    const auth = { authorization: fixture.authorization };
    await provisioned(`${origin}/v1/installs?limit=100`, auth);
    const paths = {
      listSites: '/v1/sites?limit=100',
      getInstall: `/v1/installs/${installId}`,
      listDomains: `/v1/installs/${installId}/domains`,
    };
    const bodies: Record<string, string> = {};
    let sitesEtag = '';
    let sitesBody = '';
    for (const [name, p] of Object.entries(paths)) {
      const { text, etag } = await bodyOf(`${origin}${p}`, auth);
      bodies[p] = text;
      if (name === 'listSites') [sitesEtag, sitesBody] = [etag, text];
    }
    const bodiesFile = path.join(os.tmpdir(), `hp-peers-bodies-${process.pid}.json`);
    fs.writeFileSync(bodiesFile, JSON.stringify(bodies));
    const bare = await startServer('bytes', target.serverEnv('bytes'), [bodiesFile]);
    stoppable.push(bare);
    const bareOrigin = new URL(bare.url).origin;
    const targets: Target_[] = [];
    for (const [name, p] of Object.entries(paths)) {
      targets.push({
        group: name,
        label: `ours ${name}`,
        url: `${origin}${p}`,
        headers: auth,
        pid: app.pid,
        expectStatus: 200,
      });
      targets.push({
        group: name,
        label: 'bare Fastify, same bytes',
        url: `${bareOrigin}${p.split('?')[0]}`,
        headers: {},
        pid: bare.pid,
        expectStatus: 200,
      });
    }
    targets.push({
      group: 'listSites 304',
      label: 'ours listSites, If-None-Match (304)',
      url: `${origin}${paths.listSites}`,
      headers: { ...auth, 'if-none-match': sitesEtag },
      pid: app.pid,
      expectStatus: 304,
    });
    if (withPeers) {
      const doc = await (await fetch(`${origin}/v1/swagger`)).text();
      const docFile = path.join(os.tmpdir(), `hp-peers-openapi-${process.pid}.json`);
      fs.writeFileSync(docFile, doc);
      const prism = await startPeer(
        'prism',
        (port) => ['mock', '-h', '127.0.0.1', '-p', String(port), '--errors', 'false', docFile],
        '/v1/sites?limit=100',
        auth,
      );
      stoppable.push(prism);
      const dbFile = path.join(os.tmpdir(), `hp-peers-db-${process.pid}.json`);
      fs.writeFileSync(
        dbFile,
        JSON.stringify({ sites: (JSON.parse(sitesBody) as { results: unknown[] }).results }),
      );
      const jsonServer = await startPeer(
        'json-server',
        (port) => ['--host', '127.0.0.1', '--port', String(port), '--quiet', dbFile],
        '/sites',
      );
      stoppable.push(jsonServer);
      targets.push({
        group: 'listSites',
        label: 'Prism mock of our OpenAPI',
        url: `${prism.base}/v1/sites?limit=100`,
        headers: auth,
        pid: prism.pid,
        expectStatus: 200,
      });
      targets.push({
        group: 'listSites',
        label: 'json-server, same 100 sites',
        url: `${jsonServer.base}/sites`,
        headers: {},
        pid: jsonServer.pid,
        expectStatus: 200,
      });
    }
    const sizes = new Map<string, number>();
    for (const t of targets) {
      const res = await fetch(t.url, { headers: t.headers });
      const text = await res.text();
      if (res.status !== t.expectStatus)
        throw new Error(`${t.label}: ${res.status}, expected ${t.expectStatus}`);
      sizes.set(t.label + t.group, Buffer.byteLength(text));
    }
    const tallies = await measure(targets);
    const rows = tallies.map(({ t, runs, cpu }) => {
      const latencies = Float64Array.from(runs.flatMap((r) => r.latenciesMs)).sort();
      const seconds = runs.reduce((s, r) => s + r.seconds, 0);
      const non2xx = runs.reduce((s, r) => s + r.non2xx, 0);
      return {
        db: t.label.startsWith('Prism') || t.label.startsWith('json-server') ? ('none' as const) : db,
        group: t.group,
        label: t.label,
        reqPerSec: latencies.length / seconds,
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
        requests: latencies.length,
        errors: runs.reduce((s, r) => s + r.errors + r.timeouts, 0),
        // autocannon counts a 304 as non-2xx: for the conditional GET, the 2xx are the unexpected ones.
        unexpected: t.expectStatus === 304 ? latencies.length - non2xx : non2xx,
        bytes: sizes.get(t.label + t.group) ?? 0,
        serverCpuMsPerRequest:
          cpu === null || latencies.length === 0 ? null : (1000 * cpu) / latencies.length,
      };
    });
    for (const r of rows) {
      console.log(
        `   ${`${r.group}: ${r.label}`.padEnd(52)} ${fixed(r.reqPerSec).padStart(7)} req/s  p50 ${fixed(r.p50Ms, 2)}  p99 ${fixed(r.p99Ms, 2)}  errors ${r.errors}  unexpected ${r.unexpected}`,
      );
    }
    return { rows, version: target.version };
  } finally {
    for (const s of stoppable.reverse()) await s.stop();
    await target.drop();
  }
}

function fixed(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function ratioRows(rows: Row[]) {
  const out: string[] = [];
  for (const db of ['postgres', 'pglite'] as const) {
    const of = (group: string, label: string) =>
      rows.find((r) => (r.db === db || r.db === 'none') && r.group === group && r.label.startsWith(label));
    for (const group of ['listSites', 'getInstall', 'listDomains']) {
      const ours = of(group, 'ours');
      const bare = of(group, 'bare');
      if (!ours || !bare) continue;
      const cells = [`${fixed(ours.reqPerSec / bare.reqPerSec, 3)}`];
      const prism = group === 'listSites' ? rows.find((r) => r.label.startsWith('Prism')) : undefined;
      const json = group === 'listSites' ? rows.find((r) => r.label.startsWith('json-server')) : undefined;
      cells.push(prism ? fixed(ours.reqPerSec / prism.reqPerSec, 1) : '');
      cells.push(json ? fixed(ours.reqPerSec / json.reqPerSec, 1) : '');
      out.push(`| ${db} | ${group} | ${cells.join(' | ')} | ${fixed(ours.p99Ms, 2)} |`);
    }
    const notModified = of('listSites 304', 'ours');
    const bareSites = of('listSites', 'bare');
    if (notModified && bareSites) {
      out.push(
        `| ${db} | listSites 304 | ${fixed(notModified.reqPerSec / bareSites.reqPerSec, 3)} |  |  | ${fixed(notModified.p99Ms, 2)} |`,
      );
    }
  }
  return out;
}

function markdown(rows: Row[], versions: string[], when: Date, uptimeBefore: string, uptimeAfter: string) {
  const { connections, warmupSeconds, rounds, roundSeconds } = LOAD;
  return [
    '# Reads next to bare Fastify, Prism and json-server: last results',
    '',
    `${when.toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} · Node ${process.version} · ${versions.join(' · ')}`,
    '',
    `${connections} connections; per target ${warmupSeconds} s warm-up, then ${rounds} interleaved rounds of ${roundSeconds} s. ` +
      'Servers and autocannon share the same cores (and the database, on PostgreSQL).',
    '',
    `uptime before: \`${uptimeBefore}\``,
    '',
    `uptime after: \`${uptimeAfter}\``,
    '',
    '| database | call | server | req/s | p50 ms | p99 ms | requests | errors | unexpected status | bytes | server CPU ms/req |',
    '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.db} | ${r.group} | ${r.label} | ${fixed(r.reqPerSec)} | ${fixed(r.p50Ms, 2)} | ${fixed(r.p99Ms, 2)} | ` +
        `${fixed(r.requests)} | ${r.errors} | ${r.unexpected} | ${fixed(r.bytes)} | ` +
        `${r.serverCpuMsPerRequest === null ? 'n/a' : fixed(r.serverCpuMsPerRequest, 3)} |`,
    ),
    '',
    '| database | call | ours / bare Fastify (req/s) | ours / Prism | ours / json-server | ours p99 ms |',
    '|---|---|---:|---:|---:|---:|',
    ...ratioRows(rows),
    '',
  ].join('\n');
}

async function main() {
  const wanted = process.argv.slice(2);
  const dbs = (['postgres', 'pglite'] as const).filter((k) => wanted.length === 0 || wanted.includes(k));
  if (dbs.length === 0) throw new Error(`unknown database "${wanted.join(' ')}" (pglite, postgres)`);
  ensurePeers();
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const when = new Date();
  const rows: Row[] = [];
  const versions: string[] = [];
  for (const [i, db] of dbs.entries()) {
    const result = await benchDatabase(db, i === 0);
    rows.push(...result.rows);
    versions.push(result.version);
  }
  const uptimeAfter = execFileSync('uptime').toString().trim();
  const report = markdown(rows, versions, when, uptimeBefore, uptimeAfter);
  fs.mkdirSync(RESULTS, { recursive: true });
  fs.writeFileSync(path.join(RESULTS, 'peers.md'), report);
  fs.writeFileSync(
    path.join(RESULTS, 'peers.json'),
    `${JSON.stringify({ date: when.toISOString(), node: process.version, load: LOAD, uptimeBefore, uptimeAfter, databases: versions, rows }, null, 2)}\n`,
  );
  console.log(`\n${report}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
