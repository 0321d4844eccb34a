/**
 * Issue 20, decision 122: what PGLITE_WASM=baseline (PGlite's WebAssembly on V8's Liftoff only, the
 * default) costs under load against PGLITE_WASM=optimizing (Liftoff, then TurboFan for hot functions).
 * Two real servers, `node bin/hostplane.js serve` (the compiled bundle), each on its own copy of the
 * same seeded PGlite data dir, with READ_CACHE_ENTRIES=0 (every request runs its SQL),
 * AUTH_CACHE_SECONDS=3600 and RATE_LIMIT_PER_MINUTE=0. Three scenarios:
 *   - reads: GET /v1/sites?limit=100 (100 sites, one install each), 20 connections;
 *   - writes: POST /v1/sites then DELETE /v1/sites/{id} (the delete is a transaction of three
 *     statements; both calls write the audit log), 10 connections;
 *   - heavy read: GET /v1/accounts/{id}/usage/insights over 31 days of 1,000 installs (31,000 daily
 *     rows aggregated per request), 4 connections.
 * Each server is warmed with every scenario in turn (15 s under load, so that V8's tier-up in the
 * optimizing server is done), then interleaved rounds: per scenario the servers alternate A B, B A, ...
 * Writes bench/results/pglite-wasm.{md,json} (or pglite-wasm-LABEL.* with `--label LABEL`).
 *
 *   npm run build && npm run bench:pglite-wasm [-- --label run1]
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type autocannon from 'autocannon';
import { loadConfig } from '../src/config.js';
import { openConfiguredDatabase } from '../src/main.js';
import {
  type Fixture,
  ownerAuthorization,
  prepareTarget,
  SITES,
  seed,
  type Target,
  withServices,
} from './databases.js';
import {
  assertBuilt,
  type CliProcess,
  cpuSeconds,
  percentile,
  type Run,
  rssMb,
  run,
  startCli,
  verify,
} from './load.js';
import { SEED_INSTALLS, SEED_USAGE } from './usage-seed.js';

/** Per server: 5 s of each scenario as warm-up (15 s), then 4 rounds of 3 s per scenario (12 s each). */
const LOAD = { warmupSecondsPerScenario: 5, rounds: 4, roundSeconds: 3 };
/** The heavy read's account: this many installs (one site each) with this many days of usage rows. */
const USAGE = { installs: 1000, days: 62, windowDays: 31 };
const MODES = ['baseline', 'optimizing'] as const;
type Mode = (typeof MODES)[number];
const DAY_MS = 86_400_000;
const RESULTS = fileURLToPath(new URL('results/', import.meta.url));

interface UsageFixture {
  accountId: string;
  authorization: string;
  first: string;
  last: string;
}

interface Scenario {
  name: string;
  label: string;
  connections: number;
  path: string;
  headers: Record<string, string>;
  requests?: autocannon.Request[];
  /** One request sequence outside any load run; throws when an answer is wrong. */
  verify(base: string): Promise<void>;
}

interface Tally {
  scenario: Scenario;
  mode: Mode;
  runs: Run[];
  /** Server CPU seconds of each run; null off Linux. */
  cpu: (number | null)[];
}

interface Row {
  scenario: string;
  label: string;
  mode: Mode;
  connections: number;
  reqPerSec: number;
  /** req/s of each measured round, in order. */
  roundReqPerSec: number[];
  /** Server CPU ms per request of each round, in order: a tier-up still under way would show as a drift. */
  roundCpuMsPerRequest: (number | null)[];
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: number;
  non2xx: number;
  serverCpuMsPerRequest: number | null;
}

interface ServerInfo {
  mode: Mode;
  rssStartMb: number;
  rssWarmMb: number;
  rssEndMb: number;
}

// Ctrl-C reaches the servers too (same process group); stop at the next step, then drop the data.
let interrupted = false;
process.on('SIGINT', () => {
  interrupted = true;
});

const isoDate = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A second account for the heavy read and the writes: USAGE.installs active installs with daily usage. */
async function seedUsage(target: Target): Promise<UsageFixture> {
  const { accountId, authorization } = await withServices(target.env, async (services) => {
    const account = await services.accounts.create({ name: 'Usage and writes' });
    return {
      accountId: account.id,
      authorization: await ownerAuthorization(services, [account.id], 'wasm-bench'),
    };
  });
  const today = Date.now();
  const last = isoDate(today);
  const database = await openConfiguredDatabase(loadConfig(target.env));
  try {
    const pglite = database.pglite;
    if (!pglite) throw new Error('the PGlite bench needs a PGlite database');
    await pglite.query(SEED_INSTALLS, [accountId, USAGE.installs]);
    await pglite.query(SEED_USAGE, [accountId, isoDate(today - (USAGE.days - 1) * DAY_MS), last]);
    await pglite.exec('vacuum analyze');
  } finally {
    await database.close();
  }
  return { accountId, authorization, first: isoDate(today - (USAGE.windowDays - 1) * DAY_MS), last };
}

async function expectStatus(res: Response, status: number, what: string) {
  const text = await res.text();
  if (res.status !== status)
    throw new Error(`${what}: ${res.status}, expected ${status}: ${text.slice(0, 300)}`);
  return text;
}

function scenarios(sites: Fixture, usage: UsageFixture): Scenario[] {
  const json = { authorization: usage.authorization, 'content-type': 'application/json' };
  const body = JSON.stringify({ account_id: usage.accountId, name: 'Bench write', tags: ['bench'] });
  const insights = `/v1/accounts/${usage.accountId}/usage/insights?first_date=${usage.first}&last_date=${usage.last}`;
  return [
    {
      name: 'reads',
      label: 'GET /v1/sites?limit=100 (uncached)',
      connections: 20,
      path: '/v1/sites?limit=100',
      headers: { authorization: sites.authorization },
      verify: async (base) => {
        await verify(`${base}/v1/sites?limit=100`, { authorization: sites.authorization }, (b) => {
          const page = b as { count?: unknown; results?: unknown[] };
          return page.count === SITES && page.results?.length === SITES
            ? null
            : 'not a full page of 100 sites';
        });
      },
    },
    {
      name: 'writes',
      label: 'POST /v1/sites + DELETE /v1/sites/{id}',
      connections: 10,
      path: '/v1/sites',
      // Only what every request of the sequence carries: autocannon adds these to each (a DELETE
      // with a JSON content-type and no body is a 400).
      headers: { authorization: usage.authorization },
      requests: [
        {
          method: 'POST',
          path: '/v1/sites',
          headers: json,
          body,
          onResponse: (status, text, context) => {
            (context as { siteId?: string }).siteId =
              status === 201 ? (JSON.parse(text) as { id: string }).id : undefined;
          },
        },
        {
          method: 'DELETE',
          headers: { authorization: usage.authorization },
          // A failed create deletes a site that does not exist: a 404, counted as non-2xx.
          setupRequest: (req, context) => ({
            ...req,
            path: `/v1/sites/${(context as { siteId?: string }).siteId ?? '00000000-0000-4000-8000-000000000000'}`,
          }),
        },
      ],
      verify: async (base) => {
        const created = await fetch(`${base}/v1/sites`, { method: 'POST', headers: json, body });
        const { id } = JSON.parse(await expectStatus(created, 201, 'createSite')) as { id: string };
        const deleted = await fetch(`${base}/v1/sites/${id}`, {
          method: 'DELETE',
          headers: { authorization: usage.authorization },
        });
        await expectStatus(deleted, 204, 'deleteSite');
      },
    },
    {
      name: 'heavy',
      label: `GET …/usage/insights (${USAGE.windowDays} days × ${USAGE.installs} installs)`,
      connections: 4,
      path: insights,
      headers: { authorization: usage.authorization },
      verify: async (base) => {
        await verify(`${base}${insights}`, { authorization: usage.authorization }, (b) =>
          typeof (b as { visit_count?: { total?: unknown } }).visit_count?.total === 'string'
            ? null
            : 'visit_count.total is not a string',
        );
      },
    },
  ];
}

/** The 100 installs of seed() are provisioned by the server's worker: wait until they are (provision=0). */
async function provisioned(base: string, authorization: string) {
  for (let tries = 0; tries < 240; tries++) {
    const res = await fetch(`${base}/v1/installs?limit=100`, { headers: { authorization } });
    const page = JSON.parse(await expectStatus(res, 200, 'listInstalls')) as {
      results: { status: string }[];
    };
    if (page.results.every((i) => i.status === 'active')) return;
    await sleep(250);
  }
  throw new Error('installs still provisioning after 60 s');
}

async function startServers(target: Target, sites: Fixture) {
  const servers = new Map<Mode, { process: CliProcess; base: string; info: ServerInfo }>();
  try {
    for (const mode of MODES) {
      const env = {
        ...target.serverEnv(mode),
        PGLITE_WASM: mode,
        READ_CACHE_ENTRIES: '0',
        SIMULATED_DURATIONS: 'provision=0',
      };
      const cli = await startCli(['serve'], env, /Hostplane is serving (\S+)\/v1 /, 'bin/hostplane.js');
      const base = cli.ready[1] ?? '';
      servers.set(mode, { process: cli, base, info: { mode, rssStartMb: 0, rssWarmMb: 0, rssEndMb: 0 } });
      await provisioned(base, sites.authorization);
    }
  } catch (err) {
    await Promise.all([...servers.values()].map((s) => s.process.stop()));
    throw err;
  }
  return servers;
}

async function load(base: string, pid: number, scenario: Scenario, seconds: number) {
  if (interrupted) throw new Error('interrupted');
  const before = cpuSeconds(pid);
  const result = await run(
    `${base}${scenario.path}`,
    scenario.headers,
    seconds,
    scenario.connections,
    scenario.requests,
  );
  const after = cpuSeconds(pid);
  return { result, cpu: before === null || after === null ? null : after - before };
}

const perRequest = (cpu: number | null, requests: number) =>
  cpu === null || requests === 0 ? null : (1000 * cpu) / requests;

function summarise(t: Tally): Row {
  const latencies = Float64Array.from(t.runs.flatMap((r) => r.latenciesMs)).sort();
  const seconds = t.runs.reduce((s, r) => s + r.seconds, 0);
  const cpu = t.cpu.some((c) => c === null) ? null : t.cpu.reduce((s: number, c) => s + (c ?? 0), 0);
  return {
    scenario: t.scenario.name,
    label: t.scenario.label,
    mode: t.mode,
    connections: t.scenario.connections,
    reqPerSec: latencies.length / seconds,
    roundReqPerSec: t.runs.map((r) => r.latenciesMs.length / r.seconds),
    roundCpuMsPerRequest: t.runs.map((r, i) => perRequest(t.cpu[i] ?? null, r.latenciesMs.length)),
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    requests: latencies.length,
    errors: t.runs.reduce((s, r) => s + r.errors + r.timeouts, 0),
    non2xx: t.runs.reduce((s, r) => s + r.non2xx, 0),
    serverCpuMsPerRequest: perRequest(cpu, latencies.length),
  };
}

/** baseline / optimizing per scenario: above 1 is more (time, CPU) on baseline, below 1 fewer req/s. */
function ratios(rows: Row[]) {
  return [...new Set(rows.map((r) => r.scenario))].map((scenario) => {
    const of = (mode: Mode) => rows.find((r) => r.scenario === scenario && r.mode === mode);
    const [b, o] = [of('baseline'), of('optimizing')];
    const ratio = (key: 'reqPerSec' | 'p50Ms' | 'p99Ms' | 'serverCpuMsPerRequest') =>
      (b?.[key] ?? Number.NaN) / (o?.[key] ?? Number.NaN);
    return {
      scenario,
      label: b?.label ?? '',
      reqPerSec: ratio('reqPerSec'),
      p50Ms: ratio('p50Ms'),
      p99Ms: ratio('p99Ms'),
      serverCpuMsPerRequest: ratio('serverCpuMsPerRequest'),
    };
  });
}

const cpuCell = (ms: number | null) => (ms === null ? 'n/a' : fixed(ms, 2));

function fixed(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function markdown(
  rows: Row[],
  servers: ServerInfo[],
  meta: { when: Date; version: string; uptime: string[] },
) {
  const { warmupSecondsPerScenario, rounds, roundSeconds } = LOAD;
  return [
    '# PGLITE_WASM=baseline vs optimizing under load: last results',
    '',
    `${meta.when.toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} · Node ${process.version} · ${meta.version}`,
    '',
    '`node bin/hostplane.js serve` twice, each on a copy of the same seeded data dir, READ_CACHE_ENTRIES=0. ' +
      `Warm-up: ${warmupSecondsPerScenario} s of each scenario per server (${3 * warmupSecondsPerScenario} s under load ` +
      `before any measurement), then ${rounds} rounds of ${roundSeconds} s per scenario and server, the servers ` +
      'alternating (A B, B A, ...). Servers and autocannon share the same cores.',
    '',
    `uptime before: \`${meta.uptime[0]}\``,
    '',
    `uptime after: \`${meta.uptime[1]}\``,
    '',
    '| scenario | PGLITE_WASM | connections | req/s | p50 ms | p99 ms | requests | errors | non-2xx | server CPU ms/req | CPU ms/req per round |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.label} | ${r.mode} | ${r.connections} | ${fixed(r.reqPerSec)} | ` +
        `${fixed(r.p50Ms, 1)} | ${fixed(r.p99Ms, 1)} | ${fixed(r.requests)} | ${r.errors} | ${r.non2xx} | ` +
        `${cpuCell(r.serverCpuMsPerRequest)} | ${r.roundCpuMsPerRequest.map(cpuCell).join(' / ')} |`,
    ),
    '',
    '| scenario | req/s baseline / optimizing | p50 | p99 | server CPU ms/req |',
    '|---|---:|---:|---:|---:|',
    ...ratios(rows).map(
      (r) =>
        `| ${r.label} | ${fixed(r.reqPerSec, 2)} | ${fixed(r.p50Ms, 2)} | ${fixed(r.p99Ms, 2)} | ${fixed(r.serverCpuMsPerRequest, 2)} |`,
    ),
    '',
    '| PGLITE_WASM | RSS MB after start | after warm-up | after the run |',
    '|---|---:|---:|---:|',
    ...servers.map(
      (s) => `| ${s.mode} | ${fixed(s.rssStartMb)} | ${fixed(s.rssWarmMb)} | ${fixed(s.rssEndMb)} |`,
    ),
    '',
  ].join('\n');
}

async function main() {
  const labelAt = process.argv.indexOf('--label');
  const label = labelAt === -1 ? '' : (process.argv[labelAt + 1] ?? '');
  assertBuilt();
  const uptime = () => execFileSync('uptime').toString().trim();
  const uptimeBefore = uptime();
  const when = new Date();
  console.log(
    `== seeding: ${SITES} sites with one install each; ${USAGE.installs} installs × ${USAGE.days} days`,
  );
  const target = await prepareTarget('pglite', fs.mkdtempSync(path.join(os.tmpdir(), 'hp-bench-wasm-')));
  const tallies: Tally[] = [];
  const infos: ServerInfo[] = [];
  try {
    const sites = await seed(target);
    const usage = await seedUsage(target);
    const servers = await startServers(target, sites);
    try {
      const list = scenarios(sites, usage);
      for (const [mode, s] of servers) {
        s.info.rssStartMb = rssMb(s.process.pid);
        for (const scenario of list) await scenario.verify(s.base);
        console.log(`== ${mode}: warm-up`);
        for (const scenario of list)
          await load(s.base, s.process.pid, scenario, LOAD.warmupSecondsPerScenario);
        s.info.rssWarmMb = rssMb(s.process.pid);
        infos.push(s.info);
      }
      for (const scenario of list)
        for (const mode of MODES) tallies.push({ scenario, mode, runs: [], cpu: [] });
      for (let round = 0; round < LOAD.rounds; round++) {
        for (const [i, scenario] of list.entries()) {
          const order = (round + i) % 2 === 0 ? MODES : ([...MODES].reverse() as Mode[]);
          for (const mode of order) {
            const s = servers.get(mode);
            const t = tallies.find((x) => x.scenario === scenario && x.mode === mode);
            if (!s || !t) continue;
            const { result, cpu } = await load(s.base, s.process.pid, scenario, LOAD.roundSeconds);
            t.runs.push(result);
            t.cpu.push(cpu);
          }
        }
        console.log(`   round ${round + 1}/${LOAD.rounds} done`);
      }
      for (const [, s] of servers) {
        s.info.rssEndMb = rssMb(s.process.pid);
        for (const scenario of list) await scenario.verify(s.base);
      }
    } finally {
      await Promise.all([...servers.values()].map((s) => s.process.stop()));
    }
  } finally {
    await target.drop();
  }
  const rows = tallies.map(summarise);
  const meta = { when, version: target.version, uptime: [uptimeBefore, uptime()] };
  const report = markdown(rows, infos, meta);
  const name = label ? `pglite-wasm-${label}` : 'pglite-wasm';
  fs.mkdirSync(RESULTS, { recursive: true });
  fs.writeFileSync(path.join(RESULTS, `${name}.md`), report);
  const json = {
    date: when.toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    load: LOAD,
    usage: USAGE,
  };
  fs.writeFileSync(
    path.join(RESULTS, `${name}.json`),
    `${JSON.stringify({ ...json, database: target.version, uptime: meta.uptime, rows, ratios: ratios(rows), servers: infos }, null, 2)}\n`,
  );
  console.log(`\n${report}`);
  if (rows.some((r) => r.errors > 0 || r.non2xx > 0)) {
    console.error('Some requests failed or were not 2xx: the numbers above include them.');
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
