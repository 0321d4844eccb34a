/**
 * Issue 29 defect 4: GET /v1/sites?limit=100 next to bare Fastify serving the same bytes, as a ratio
 * measured in one run with the targets interleaved round by round (A B C, then B C A, ...), so that a
 * shared machine's neighbours weigh on every target alike. With `--base DIR` (another checkout with
 * its node_modules, e.g. `git archive main | tar -x -C DIR`), that tree's server runs on the same
 * database too, so a change is measured against the code before it in the same run.
 *
 *   npm run bench:reads -- [--db postgres|pglite] [--base DIR] [--rounds 6] [--seconds 3]
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

/** /proc/stat's cpu line: [busy, idle, steal] in clock ticks since boot. */
function machineTicks(): [number, number, number] {
  const fields = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
  return [user + nice + system + irq + softirq + steal, idle + iowait, steal];
}

/**
 * CPU seconds of every PostgreSQL server process on the machine (its backends serve our lookups), by
 * pid: a second's share is summed over the processes alive at both ends (backends come and go).
 */
function postgresSeconds(): Map<string, number> {
  const byPid = new Map<string, number>();
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byPid.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {}
  }
  return byPid;
}

function postgresDelta(before: Map<string, number>, after: Map<string, number>): number {
  let seconds = 0;
  for (const [pid, now] of after) seconds += now - (before.get(pid) ?? now);
  return seconds;
}

interface MachineSecond {
  /** Cores' worth the PostgreSQL server's processes used (0 on PGlite, which runs inside the server). */
  postgres: number;
  /** Cores' worth of CPU the server process used in that second. */
  server: number;
  /** Cores' worth the bench process (autocannon, the client) used. */
  client: number;
  /** Idle cores of the machine, and cores stolen by the hypervisor. */
  idle: number;
  steal: number;
}

/** Per 1-s window during a long run: where the machine's CPU went (is the server starved, or the client?). */
function machineSampler(serverPid: number) {
  const seconds: MachineSecond[] = [];
  const sample = () => ({
    ticks: machineTicks(),
    server: cpuSeconds(serverPid) ?? 0,
    client: process.cpuUsage(),
    postgres: postgresSeconds(),
  });
  let last = sample();
  const timer = setInterval(() => {
    const now = sample();
    const client = (now.client.user + now.client.system - last.client.user - last.client.system) / 1e6;
    seconds.push({
      server: Number((now.server - last.server).toFixed(2)),
      postgres: Number(postgresDelta(last.postgres, now.postgres).toFixed(2)),
      client: Number(client.toFixed(2)),
      idle: Number(((now.ticks[1] - last.ticks[1]) / 100).toFixed(2)),
      steal: Number(((now.ticks[2] - last.ticks[2]) / 100).toFixed(2)),
    });
    last = now;
  }, 1000);
  return {
    stop: () => {
      clearInterval(timer);
      return seconds;
    },
  };
}

interface Target {
  machine?: MachineSecond[];
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
    const bodiesFile = path.join(monitorDir, 'bodies.json');
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
        const sampler = machineSampler(t.server.pid);
        t.runs.push(await run(t.url, t.headers, long, connections));
        t.machine = sampler.stop();
        t.cpu = (cpuSeconds(t.server.pid) ?? 0) - (before ?? 0);
        console.log(`   ${t.runs[0]?.perSecond.join(' ')}`);
        console.log(`   server cores per second: ${t.machine.map((m) => m.server).join(' ')}`);
        console.log(`   machine idle cores per second: ${t.machine.map((m) => m.idle).join(' ')}`);
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
        machine: t.machine,
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
      ...(long
        ? [
            '',
            ...rows.flatMap((r) => [
              `${r.label}, 2xx per 1-s window: ${r.perSecond?.join(' ')}`,
              '',
              `${r.label}, server CPU µs per answer, per window: ${r.machine
                ?.map((m, i) =>
                  (r.perSecond?.[i] ?? 0) > 0 ? Math.round((1e6 * m.server) / (r.perSecond?.[i] ?? 1)) : '-',
                )
                .join(' ')}`,
              '',
              `${r.label}, per second: server cores ${r.machine?.map((m) => m.server).join(' ')}; ` +
                `client (autocannon) cores ${r.machine?.map((m) => m.client).join(' ')}; ` +
                `PostgreSQL cores ${r.machine?.map((m) => m.postgres).join(' ')}; ` +
                `machine idle cores ${r.machine?.map((m) => m.idle).join(' ')}; stolen ${r.machine?.map((m) => m.steal).join(' ')}`,
              '',
            ]),
          ]
        : []),
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
      for (const f of fs.readdirSync(monitorDir).filter((name) => name.endsWith('.jsonl'))) {
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
