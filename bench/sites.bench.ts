/**
 * Authenticated `GET /v1/sites?limit=100` (an owner, 100 sites with one install each) against two
 * baselines measured in the same run, on PGlite and on PostgreSQL:
 *   (a) a bare Fastify route returning `{hello: 'world'}`;
 *   (b) a bare Fastify route running the equivalent hand-written SQL (no auth, no schema, no ORM).
 *
 *   npm run bench               both databases
 *   npm run bench -- postgres   one of pglite, postgres
 *
 * Each server runs in its own child process; autocannon runs here. The three routes of a database
 * are measured in interleaved rounds, so that load from elsewhere on the machine hits all three
 * alike. Writes bench/results/sites.{md,json}. See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DbKind, type Fixture, prepareTarget, SITES, seed } from './databases.js';
import {
  cpuSeconds,
  percentile,
  type Run,
  run,
  type Server,
  type ServerKind,
  startServer,
  verify,
} from './load.js';

/** The same for every route: 20 connections, 2 s warm-up, then 4 rounds of 2 s = 8 s measured. */
const LOAD = { connections: 20, warmupSeconds: 2, rounds: 4, roundSeconds: 2 };
const RESULTS = fileURLToPath(new URL('results/', import.meta.url));

interface Route {
  kind: ServerKind;
  label: string;
  args: string[];
  headers: Record<string, string>;
  /** More server settings, and the server's own name for its data dir (PGlite: one process per dir). */
  env?: { name: string; vars: Record<string, string> };
  /** Returns a problem with the response body, or null when it is right. */
  check(body: unknown): string | null;
}

interface Row {
  db: DbKind;
  kind: ServerKind;
  label: string;
  path: string;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  responseBytes: number;
  /** CPU time of the server process while it was measured, in % of one core; null off Linux. */
  serverCpuPercent: number | null;
  /** Server CPU time per response: moves much less than req/s when other work shares the cores. */
  serverCpuMsPerRequest: number | null;
  /** Mean 1-minute load average at the end of its rounds (this bench alone accounts for about 2). */
  loadAverage: number;
}

// Ctrl-C reaches the servers too (same process group); stop at the next step, then drop the database.
let interrupted = false;
process.on('SIGINT', () => {
  interrupted = true;
});

/** A full page: count 100, 100 results, one install each. */
function checkSitesPage(body: unknown): string | null {
  const page = body as { count?: unknown; results?: { installs?: unknown[] }[] };
  if (page.count !== SITES) return `count is ${String(page.count)}, expected ${SITES}`;
  if (page.results?.length !== SITES) return `${page.results?.length ?? 'no'} results, expected ${SITES}`;
  const bad = page.results.findIndex((s) => s.installs?.length !== 1);
  return bad === -1 ? null : `results[${bad}] does not have exactly one install`;
}

function routes(fixture: Fixture): Route[] {
  return [
    {
      kind: 'hello',
      label: '(a) bare route, constant JSON',
      args: [],
      headers: {},
      check: (body) => ((body as { hello?: unknown }).hello === 'world' ? null : 'expected {hello: "world"}'),
    },
    {
      kind: 'raw',
      label: '(b) bare route, raw SQL',
      args: [fixture.accountId],
      headers: {},
      check: checkSitesPage,
    },
    {
      kind: 'app',
      label: 'ours: GET /v1/sites?limit=100, read cache off',
      args: [],
      headers: { authorization: fixture.authorization },
      // Every request runs its SQL: what the route costs without the read cache (issue 14).
      env: { name: 'app-uncached', vars: { READ_CACHE_ENTRIES: '0' } },
      check: checkSitesPage,
    },
    {
      kind: 'app',
      label: 'ours: GET /v1/sites?limit=100, read cache on (default)',
      args: [],
      headers: { authorization: fixture.authorization },
      check: checkSitesPage,
    },
  ];
}

interface Tally {
  route: Route;
  server: Server;
  responseBytes: number;
  runs: Run[];
  cpu: number | null;
  loads: number[];
}

function summarise(db: DbKind, t: Tally): Row {
  const latencies = Float64Array.from(t.runs.flatMap((r) => r.latenciesMs)).sort();
  const seconds = t.runs.reduce((s, r) => s + r.seconds, 0);
  const sum = (key: 'errors' | 'timeouts' | 'non2xx') => t.runs.reduce((s, r) => s + r[key], 0);
  return {
    db,
    kind: t.route.kind,
    label: t.route.label,
    path: t.server.path,
    reqPerSec: latencies.length / seconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    requests: latencies.length,
    errors: sum('errors'),
    timeouts: sum('timeouts'),
    non2xx: sum('non2xx'),
    responseBytes: t.responseBytes,
    serverCpuPercent: t.cpu === null ? null : (100 * t.cpu) / seconds,
    serverCpuMsPerRequest:
      t.cpu === null || latencies.length === 0 ? null : (1000 * t.cpu) / latencies.length,
    loadAverage: t.loads.reduce((s, l) => s + l, 0) / Math.max(1, t.loads.length),
  };
}

/** Warm-up, then rounds in a rotating order (hello, raw, app; raw, app, hello; …). */
async function measure(tallies: Tally[]) {
  const { connections, warmupSeconds, rounds, roundSeconds } = LOAD;
  for (const t of tallies) await run(t.server.url, t.route.headers, warmupSeconds, connections);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < tallies.length; i++) {
      const t = tallies[(round + i) % tallies.length];
      if (!t) continue;
      if (interrupted) throw new Error('interrupted');
      const before = cpuSeconds(t.server.pid);
      t.runs.push(await run(t.server.url, t.route.headers, roundSeconds, connections));
      const after = cpuSeconds(t.server.pid);
      t.cpu = t.cpu === null || before === null || after === null ? null : t.cpu + after - before;
      t.loads.push(os.loadavg()[0] ?? 0);
    }
  }
}

async function benchDatabase(db: DbKind, versions: string[]): Promise<Row[]> {
  console.log(`== ${db}: migrating and seeding ${SITES} sites with one install each`);
  const target = await prepareTarget(db, fs.mkdtempSync(path.join(os.tmpdir(), `hp-bench-${db}-`)));
  versions.push(target.version);
  const servers: Server[] = [];
  try {
    const fixture = await seed(target);
    const tallies: Tally[] = [];
    for (const route of routes(fixture)) {
      const env = { ...target.serverEnv(route.env?.name ?? route.kind), ...route.env?.vars };
      const server = await startServer(route.kind, env, route.args);
      servers.push(server);
      const responseBytes = await verify(server.url, route.headers, route.check);
      tallies.push({ route, server, responseBytes, runs: [], cpu: 0, loads: [] });
    }
    await measure(tallies);
    for (const t of tallies) await verify(t.server.url, t.route.headers, t.route.check);
    const rows = tallies.map((t) => summarise(db, t));
    for (const r of rows) {
      console.log(
        `   ${r.label.padEnd(56)} ${fixed(r.reqPerSec).padStart(7)} req/s  p50 ${fixed(r.p50Ms, 2)} ms  ` +
          `p99 ${fixed(r.p99Ms, 2)} ms  errors ${r.errors}  non-2xx ${r.non2xx}`,
      );
    }
    return rows;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await target.drop();
  }
}

function fixed(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Each of our rows (read cache off, on) over the two baselines of the same database. */
function ratios(rows: Row[]) {
  return rows
    .filter((r) => r.kind === 'app')
    .map((app) => {
      const of = (kind: ServerKind) => rows.find((r) => r.db === app.db && r.kind === kind);
      const [hello, raw] = [of('hello'), of('raw')];
      const cpu = (r: Row | undefined) => r?.serverCpuMsPerRequest ?? Number.NaN;
      return {
        db: app.db,
        label: app.label,
        oursOverHello: app.reqPerSec / (hello?.reqPerSec ?? Number.NaN),
        oursOverRaw: app.reqPerSec / (raw?.reqPerSec ?? Number.NaN),
        /** Raw-SQL CPU per request over ours: the req/s ratio the server would reach alone on a core. */
        cpuRawOverOurs: cpu(raw) / cpu(app),
      };
    });
}

function markdown(rows: Row[], versions: string[], when: Date, loadBefore: number): string {
  const { connections, warmupSeconds, rounds, roundSeconds } = LOAD;
  const met = (ratio: number) => (ratio >= 0.5 ? 'met' : 'not met');
  return [
    '# GET /v1/sites?limit=100: last results',
    '',
    `${when.toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} · Node ${process.version} · ` +
      `${versions.join(' · ')}`,
    '',
    `${connections} connections; per route ${warmupSeconds} s warm-up, then ${rounds} interleaved rounds of ` +
      `${roundSeconds} s (${rounds * roundSeconds} s measured). Server and autocannon in separate processes on the ` +
      `same cores. 1-minute load average before the start: ${fixed(loadBefore, 1)}.`,
    '',
    '| database | route | req/s | p50 ms | p99 ms | requests | errors | non-2xx | bytes/response | server CPU | server CPU ms/req | load avg |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.db} | ${r.label} | ${fixed(r.reqPerSec)} | ${fixed(r.p50Ms, 2)} | ${fixed(r.p99Ms, 2)} | ` +
        `${fixed(r.requests)} | ${r.errors + r.timeouts} | ${r.non2xx} | ${fixed(r.responseBytes)} | ` +
        `${r.serverCpuPercent === null ? 'n/a' : `${fixed(r.serverCpuPercent)} %`} | ` +
        `${r.serverCpuMsPerRequest === null ? 'n/a' : fixed(r.serverCpuMsPerRequest, 3)} | ${fixed(r.loadAverage, 1)} |`,
    ),
    '',
    '| database | ours | req/s ours / (a) | req/s ours / (b) | CPU ms/req (b) / ours | target ≥ 0.50 (req/s) |',
    '|---|---|---:|---:|---:|---|',
    ...ratios(rows).map(
      (r) =>
        `| ${r.db} | ${r.label} | ${fixed(r.oursOverHello, 3)} | ${fixed(r.oursOverRaw, 3)} | ${fixed(r.cpuRawOverOurs, 3)} | ` +
        `vs (a) ${met(r.oursOverHello)}, vs (b) ${met(r.oursOverRaw)} |`,
    ),
    '',
  ].join('\n');
}

async function main() {
  const wanted = process.argv.slice(2);
  const dbs = (['pglite', 'postgres'] as const).filter((k) => wanted.length === 0 || wanted.includes(k));
  if (dbs.length === 0) throw new Error(`unknown database "${wanted.join(' ')}" (pglite, postgres)`);
  const loadBefore = os.loadavg()[0] ?? 0;
  if (loadBefore > 1) console.warn(`Load average is ${fixed(loadBefore, 1)} before the start: expect noise.`);
  const when = new Date();
  const rows: Row[] = [];
  const versions: string[] = [];
  for (const db of dbs) rows.push(...(await benchDatabase(db, versions)));
  const report = markdown(rows, versions, when, loadBefore);
  fs.mkdirSync(RESULTS, { recursive: true });
  fs.writeFileSync(path.join(RESULTS, 'sites.md'), report);
  const json = {
    date: when.toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    load: LOAD,
    loadBefore,
  };
  fs.writeFileSync(
    path.join(RESULTS, 'sites.json'),
    `${JSON.stringify({ ...json, databases: versions, rows, ratios: ratios(rows) }, null, 2)}\n`,
  );
  console.log(`\n${report}`);
  if (rows.some((r) => r.errors > 0 || r.timeouts > 0 || r.non2xx > 0)) {
    console.error('Some requests failed or were not 2xx: the numbers above include them.');
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
