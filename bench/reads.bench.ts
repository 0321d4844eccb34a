/**
 * Issue 29 defect 4: GET /v1/sites?limit=100 next to bare Fastify serving the same bytes, as a ratio
 * measured in one run with the targets interleaved round by round (A B C, then B C A, ...), so that a
 * shared machine's neighbours weigh on every target alike. With `--base DIR` (another checkout with
 * its node_modules, e.g. `git archive main | tar -x -C DIR`), that tree's server runs on the same
 * database too, so a change is measured against the code before it in the same run.
 *
 *   npx tsx bench/reads.bench.ts [--db postgres|pglite] [--base DIR] [--rounds 6] [--seconds 3]
 *     [--connections 50] [--label L]
 *
 * Reported per target: req/s, p50/p99, server CPU ms per request (user + system from /proc), and
 * per round the load average; the ratios are of the sums over all rounds. Writes
 * bench/results/reads[-label].{md,json}.
 *
 * `--long S` instead: ONE credential (AUTH_CACHE_SECONDS=10) for S seconds on each server in turn
 * (ours, then bare, then base), 2xx per 1-s window, the server's own monitor lines (BENCH_MONITOR=1:
 * event-loop delay, utilisation, heap, GC, pool) saved beside the results (issue 29: "the slide").
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DbKind, prepareTarget, seed } from './databases.js';
import { cpuSeconds, percentile, type Run, run, type Server, startServer } from './load.js';

const PATH = '/v1/sites?limit=100';
const RESULTS = fileURLToPath(new URL('results', import.meta.url));

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const loadavg = () => os.loadavg()[0]?.toFixed(2) ?? '?';
const fixed = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

interface Target {
  label: string;
  url: string;
  headers: Record<string, string>;
  server: Server;
  runs: Run[];
  cpu: number;
  perRound: number[];
}

async function main() {
  const db = arg('db', 'postgres') as DbKind;
  const base = arg('base', '');
  const rounds = Number(arg('rounds', '6'));
  const seconds = Number(arg('seconds', '3'));
  const connections = Number(arg('connections', '50'));
  const long = Number(arg('long', '0'));
  // LOG_LEVEL of our servers (the bench's default is silent; `npm start` logs at info).
  const logLevel = arg('log-level', 'silent');
  const label = arg('label', long ? 'long' : '');
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const when = new Date();
  console.log(`== ${db}: seeding 100 sites, one install each, one owner credential (${uptimeBefore})`);
  const target = await prepareTarget(db, fs.mkdtempSync(path.join(os.tmpdir(), 'hp-reads-bench-')));
  const servers: Server[] = [];
  const monitorDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hp-reads-monitor-'));
  try {
    const fixture = await seed(target);
    const headers = { authorization: fixture.authorization };
    // The long run keeps the default credential cache life, so it crosses expiries as the issue's did.
    const appEnv = (name: string) => ({
      ...target.serverEnv(name),
      LOG_LEVEL: logLevel,
      ...(long && {
        AUTH_CACHE_SECONDS: '10',
        BENCH_MONITOR: path.join(monitorDir, `${name}.jsonl`),
      }),
    });
    const ours = await startServer('app', appEnv('ours'), []);
    servers.push(ours);
    const origin = new URL(ours.url).origin;
    const res = await fetch(`${origin}${PATH}`, { headers });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${PATH}: ${res.status} ${body.slice(0, 200)}`);
    const bodiesFile = path.join(os.tmpdir(), `hp-reads-bodies-${process.pid}.json`);
    fs.writeFileSync(bodiesFile, JSON.stringify({ [PATH]: body }));
    const bare = await startServer('bytes', target.serverEnv('bytes'), [bodiesFile]);
    servers.push(bare);
    const targets: Target[] = [
      { label: 'ours', url: `${origin}${PATH}`, headers, server: ours, runs: [], cpu: 0, perRound: [] },
      {
        label: 'bare Fastify, same bytes',
        url: `${new URL(bare.url).origin}/v1/sites`,
        headers: {},
        server: bare,
        runs: [],
        cpu: 0,
        perRound: [],
      },
    ];
    if (base) {
      const before = await startServer('app', appEnv('base'), [], { root: base });
      servers.push(before);
      const baseUrl = `${new URL(before.url).origin}${PATH}`;
      const baseBody = await (await fetch(baseUrl, { headers })).text();
      if (baseBody !== body) throw new Error('the base tree answers other bytes than this one');
      targets.push({
        label: `base (${base})`,
        url: baseUrl,
        headers,
        server: before,
        runs: [],
        cpu: 0,
        perRound: [],
      });
    }
    const loads: string[] = [];
    for (const t of targets) await run(t.url, t.headers, 2, connections);
    if (long) {
      for (const t of targets) {
        loads.push(loadavg());
        const before = cpuSeconds(t.server.pid);
        console.log(
          `== ${t.label}: one credential, ${connections} connections, ${long} s (load ${loadavg()})`,
        );
        t.runs.push(await run(t.url, t.headers, long, connections));
        t.cpu = (cpuSeconds(t.server.pid) ?? 0) - (before ?? 0);
        console.log(`   ${t.runs[0]?.perSecond.join(' ')}`);
      }
    } else {
      for (let round = 0; round < rounds; round++) {
        loads.push(loadavg());
        const line: string[] = [];
        for (let i = 0; i < targets.length; i++) {
          const t = targets[(round + i) % targets.length];
          if (!t) continue;
          const before = cpuSeconds(t.server.pid);
          const r = await run(t.url, t.headers, seconds, connections);
          t.cpu += (cpuSeconds(t.server.pid) ?? 0) - (before ?? 0);
          t.runs.push(r);
          t.perRound.push(r.latenciesMs.length / r.seconds);
          line.push(`${t.label.split(' ')[0]} ${fixed(r.latenciesMs.length / r.seconds)}`);
        }
        console.log(`   round ${round + 1} (load ${loads[round]}): ${line.join(', ')}`);
      }
    }
    const rows = targets.map((t) => {
      const latencies = Float64Array.from(t.runs.flatMap((r) => r.latenciesMs)).sort();
      const secs = t.runs.reduce((s, r) => s + r.seconds, 0);
      return {
        label: t.label,
        reqPerSec: latencies.length / secs,
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
        requests: latencies.length,
        errors: t.runs.reduce((s, r) => s + r.errors + r.timeouts + r.non2xx, 0),
        cpuMsPerRequest: (1000 * t.cpu) / Math.max(1, latencies.length),
        perRound: t.perRound,
        perSecond: long ? t.runs[0]?.perSecond : undefined,
      };
    });
    const [o, b, p] = rows;
    if (!o || !b) throw new Error('no rows');
    const roundRatios = o.perRound.map((n, i) => n / (b.perRound[i] ?? Number.NaN));
    const uptimeAfter = execFileSync('uptime').toString().trim();
    const md = [
      `# Reads: GET ${PATH}, ours next to bare Fastify${label ? ` (${label})` : ''}`,
      '',
      `${when.toISOString()} · ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} · Node ${process.version} · ${target.version}`,
      '',
      `uptime before: \`${uptimeBefore}\``,
      '',
      `uptime after: \`${uptimeAfter}\``,
      '',
      long
        ? `one credential, ${connections} connections, ${long} s per server, one after the other, LOG_LEVEL=${logLevel}; 1-min load at each start: ${loads.join(', ')}`
        : `${connections} connections, ${rounds} interleaved rounds of ${seconds} s (after 2 s warm-up each), LOG_LEVEL=${logLevel}; 1-min load per round: ${loads.join(', ')}`,
      '',
      '| server | req/s | p50 ms | p99 ms | requests | errors + non-2xx | server CPU ms/req |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...rows.map(
        (r) =>
          `| ${r.label} | ${fixed(r.reqPerSec)} | ${fixed(r.p50Ms, 2)} | ${fixed(r.p99Ms, 2)} | ${fixed(r.requests)} | ${r.errors} | ${fixed(r.cpuMsPerRequest, 4)} |`,
      ),
      '',
      `ours / bare Fastify: **${fixed(o.reqPerSec / b.reqPerSec, 3)}** req/s, CPU per request bare / ours ${fixed(b.cpuMsPerRequest / o.cpuMsPerRequest, 3)}` +
        (long ? '' : `; per round ${roundRatios.map((r) => fixed(r, 2)).join(' ')}`),
      ...(p
        ? [
            '',
            `ours / base: ${fixed(o.reqPerSec / p.reqPerSec, 3)} req/s; base / bare Fastify ${fixed(p.reqPerSec / b.reqPerSec, 3)}; CPU per request ours / base ${fixed(o.cpuMsPerRequest / p.cpuMsPerRequest, 3)}` +
              (long
                ? ''
                : `; per round ours / base ${o.perRound.map((n, i) => fixed(n / (p.perRound[i] ?? Number.NaN), 2)).join(' ')}`),
          ]
        : []),
      ...(long ? ['', ...rows.map((r) => `${r.label}, 2xx per 1-s window: ${r.perSecond?.join(' ')}`)] : []),
      '',
    ].join('\n');
    fs.mkdirSync(RESULTS, { recursive: true });
    const name = `reads${label ? `-${label}` : ''}`;
    fs.writeFileSync(path.join(RESULTS, `${name}.md`), md);
    fs.writeFileSync(
      path.join(RESULTS, `${name}.json`),
      `${JSON.stringify({ date: when.toISOString(), db: target.version, uptimeBefore, uptimeAfter, loads, rows }, null, 2)}\n`,
    );
    console.log(`\n${md}`);
  } finally {
    for (const s of servers.reverse()) await s.stop();
    await target.drop();
    if (long) {
      for (const f of fs.readdirSync(monitorDir)) {
        fs.copyFileSync(path.join(monitorDir, f), path.join(RESULTS, `reads-${label}-monitor-${f}`));
      }
    }
    fs.rmSync(monitorDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
