/**
 * Issue 20: one busy credential over a run longer than the credential cache's life. 50 connections
 * on GET /v1/sites?limit=100 with ONE credential, on PostgreSQL, through the real server
 * (bench/server.ts app: the composition root of `npm start`) with the default AUTH_CACHE_SECONDS=10,
 * for 32 s (three expiries), reporting 2xx answers per 1-second window; then bare Fastify serving the
 * very same bytes from memory (bench/server.ts bytes), in the same run, as the yardstick. Also: the
 * server's CPU seconds in the 4 s after the load (hashes left running), and its password hashes
 * (hostplane_password_hashes_total, when the server has it).
 *
 *   npm run bench:auth                 writes bench/results/auth-expiry.{md,json}
 *   npm run bench:auth -- before       the same, labelled (bench/results/auth-expiry-before.*)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { prepareTarget, seed } from './databases.js';
import { cpuSeconds, percentile, run, startServer } from './load.js';

const LOAD = { connections: 50, seconds: 32, bareSeconds: 10, warmupSeconds: 1, cacheSeconds: 10 };
const PATH = '/v1/sites?limit=100';
const RESULTS = fileURLToPath(new URL('results', import.meta.url));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function hashesOf(origin: string): Promise<number | null> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('hostplane_password_hashes_total '));
  return line ? Number(line.split(' ')[1]) : null;
}

function fixed(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

async function main() {
  const label = process.argv[2] ?? '';
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const when = new Date();
  console.log('== postgres: seeding 100 sites, one install each, one owner credential');
  const target = await prepareTarget('postgres', fs.mkdtempSync(path.join(os.tmpdir(), 'hp-auth-bench-')));
  const stops: (() => Promise<void>)[] = [];
  try {
    const fixture = await seed(target);
    const app = await startServer(
      'app',
      { ...target.serverEnv('app'), AUTH_CACHE_SECONDS: String(LOAD.cacheSeconds) },
      [],
    );
    stops.push(app.stop);
    const origin = new URL(app.url).origin;
    const headers = { authorization: fixture.authorization };
    const res = await fetch(`${origin}${PATH}`, { headers });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${PATH}: ${res.status} ${body.slice(0, 200)}`);
    const bodiesFile = path.join(os.tmpdir(), `hp-auth-bench-bodies-${process.pid}.json`);
    fs.writeFileSync(bodiesFile, JSON.stringify({ [PATH]: body }));
    const bare = await startServer('bytes', target.serverEnv('bytes'), [bodiesFile]);
    stops.push(bare.stop);
    const bareUrl = `${new URL(bare.url).origin}/v1/sites`;

    const { connections, seconds, bareSeconds, warmupSeconds } = LOAD;
    // Both sides warmed up alike (JIT, connections); ours inside the credential's first cache life,
    // so the measured run still crosses three expiries.
    await run(bareUrl, {}, warmupSeconds, connections);
    await run(`${origin}${PATH}`, headers, warmupSeconds, connections);
    // The credential's cache entry was made by the first request above; the run starts inside its life.
    const hashesBefore = await hashesOf(origin);
    console.log(`== ours: ${connections} connections, one credential, ${seconds} s`);
    const cpuStart = cpuSeconds(app.pid);
    const ours = await run(`${origin}${PATH}`, headers, seconds, connections);
    const cpuEnd = cpuSeconds(app.pid);
    await sleep(4000);
    const cpuAfter = cpuSeconds(app.pid);
    const hashesAfter = await hashesOf(origin);
    console.log(`== bare Fastify, same bytes: ${connections} connections, ${bareSeconds} s`);
    const bareCpuStart = cpuSeconds(bare.pid);
    const base = await run(bareUrl, {}, bareSeconds, connections);
    const bareCpuEnd = cpuSeconds(bare.pid);

    const bareMean = base.perSecond.reduce((s, n) => s + n, 0) / base.perSecond.length;
    const ratios = ours.perSecond.map((n) => n / bareMean);
    const sorted = Float64Array.from(ours.latenciesMs).sort();
    const summary = {
      label,
      date: when.toISOString(),
      node: process.version,
      cpus: `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}`,
      database: target.version,
      load: LOAD,
      uptimeBefore,
      uptimeAfter: execFileSync('uptime').toString().trim(),
      ours: {
        perSecond: ours.perSecond,
        requests: ours.latenciesMs.length,
        non2xx: ours.non2xx,
        errors: ours.errors + ours.timeouts,
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        cpuSecondsDuring: cpuStart === null || cpuEnd === null ? null : cpuEnd - cpuStart,
        cpuSecondsIn4sAfter: cpuEnd === null || cpuAfter === null ? null : cpuAfter - cpuEnd,
        passwordHashes: hashesBefore === null || hashesAfter === null ? null : hashesAfter - hashesBefore,
      },
      bare: {
        perSecond: base.perSecond,
        meanPerSecond: bareMean,
        requests: base.latenciesMs.length,
        cpuSecondsDuring: bareCpuStart === null || bareCpuEnd === null ? null : bareCpuEnd - bareCpuStart,
      },
      ratioPerSecond: ratios,
      minRatio: Math.min(...ratios),
      meanRatio: ratios.reduce((s, r) => s + r, 0) / ratios.length,
    };
    // Server CPU per answered request: what each server spends, whatever the neighbours' load does to req/s.
    const perRequest = (cpu: number | null, requests: number) =>
      cpu === null || requests === 0 ? null : (cpu * 1000) / requests;
    const cpuMsPerRequest = {
      ours: perRequest(summary.ours.cpuSecondsDuring, summary.ours.requests),
      bare: perRequest(summary.bare.cpuSecondsDuring, summary.bare.requests),
    };
    Object.assign(summary, { cpuMsPerRequest });
    const md = [
      `# Issue 20: one busy credential over ${seconds} s${label ? ` (${label})` : ''}`,
      '',
      `${summary.date} · ${summary.cpus} · Node ${summary.node} · ${summary.database} · shared machine`,
      '',
      `uptime before: \`${summary.uptimeBefore}\``,
      '',
      `uptime after: \`${summary.uptimeAfter}\``,
      '',
      `${connections} connections, GET ${PATH}, one credential, AUTH_CACHE_SECONDS=${LOAD.cacheSeconds}, ` +
        `RATE_LIMIT_PER_MINUTE=0; then bare Fastify serving the same ${fixed(Buffer.byteLength(body))} bytes for ${bareSeconds} s.`,
      '',
      `ours, 2xx per 1-s window: ${ours.perSecond.join(' ')}`,
      '',
      `bare Fastify, per 1-s window: ${base.perSecond.join(' ')} (mean ${fixed(bareMean)})`,
      '',
      `ours / bare mean, per window: ${ratios.map((r) => fixed(r, 2)).join(' ')}`,
      '',
      `min ${fixed(summary.minRatio, 2)}, mean ${fixed(summary.meanRatio, 2)}; p50 ${fixed(summary.ours.p50Ms, 2)} ms, ` +
        `p99 ${fixed(summary.ours.p99Ms, 2)} ms; non-2xx ${ours.non2xx}, errors ${summary.ours.errors}; ` +
        `server CPU ${summary.ours.cpuSecondsDuring?.toFixed(2) ?? 'n/a'} s during, ` +
        `${summary.ours.cpuSecondsIn4sAfter?.toFixed(2) ?? 'n/a'} s in the 4 s after; ` +
        `password hashes during the run: ${summary.ours.passwordHashes ?? 'n/a (no counter)'}`,
      '',
      `server CPU per request: ours ${cpuMsPerRequest.ours?.toFixed(4) ?? 'n/a'} ms, bare Fastify ` +
        `${cpuMsPerRequest.bare?.toFixed(4) ?? 'n/a'} ms (ratio bare / ours ` +
        `${cpuMsPerRequest.ours && cpuMsPerRequest.bare ? fixed(cpuMsPerRequest.bare / cpuMsPerRequest.ours, 2) : 'n/a'})`,
      '',
    ].join('\n');
    fs.mkdirSync(RESULTS, { recursive: true });
    const name = `auth-expiry${label ? `-${label}` : ''}`;
    fs.writeFileSync(path.join(RESULTS, `${name}.md`), md);
    fs.writeFileSync(path.join(RESULTS, `${name}.json`), `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`\n${md}`);
  } finally {
    for (const stop of stops.reverse()) await stop();
    await target.drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
