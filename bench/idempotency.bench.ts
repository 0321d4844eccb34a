/**
 * Issue 22: the cost of `Idempotency-Key` on createSite. The real server (bench/server.ts app: the
 * composition root of `npm start`) on PostgreSQL; autocannon POSTs /v1/sites with the same body, each
 * request with a fresh key ("with") or with none ("without"), in interleaved rounds so that load from
 * elsewhere hits both alike. The ratio is the without/with requests per second (goal: within 1.3x).
 *
 *   npm run bench:idempotency            writes bench/results/idempotency.{md,json}
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { prepareTarget, seed } from './databases.js';
import { cpuSeconds, percentile, startServer } from './load.js';

const LOAD = { connections: 10, rounds: 4, roundSeconds: 3, warmupSeconds: 2 };
const RESULTS = fileURLToPath(new URL('results', import.meta.url));

interface Round {
  requests: number;
  non2xx: number;
  latenciesMs: number[];
  cpuSeconds: number | null;
}

function round(
  url: string,
  authorization: string,
  body: string,
  withKey: boolean,
  seconds: number,
  pid: number,
) {
  return new Promise<Round>((resolve, reject) => {
    const latenciesMs: number[] = [];
    let non2xx = 0;
    const cpuStart = cpuSeconds(pid);
    const instance = autocannon(
      {
        url,
        connections: LOAD.connections,
        duration: seconds,
        requests: [
          {
            method: 'POST',
            headers: { authorization, 'content-type': 'application/json' },
            body,
            setupRequest: (req) =>
              withKey ? { ...req, headers: { ...req.headers, 'idempotency-key': randomUUID() } } : req,
          },
        ],
      },
      (err) => {
        if (err) return reject(err);
        const cpuEnd = cpuSeconds(pid);
        resolve({
          requests: latenciesMs.length,
          non2xx,
          latenciesMs,
          cpuSeconds: cpuStart === null || cpuEnd === null ? null : cpuEnd - cpuStart,
        });
      },
    );
    instance.on('response', (_client, status, _bytes, responseTime) => {
      latenciesMs.push(responseTime);
      if (status < 200 || status > 299) non2xx++;
    });
  });
}

async function main() {
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const target = await prepareTarget('postgres', fs.mkdtempSync(path.join(os.tmpdir(), 'hp-idem-bench-')));
  const stops: (() => Promise<void>)[] = [];
  try {
    const fixture = await seed(target);
    const app = await startServer('app', target.serverEnv('app'), []);
    stops.push(app.stop);
    const url = `${new URL(app.url).origin}/v1/sites`;
    const body = JSON.stringify({ account_id: fixture.accountId, name: 'Idempotency bench site' });
    const check = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: fixture.authorization,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
      },
      body,
    });
    if (check.status !== 201)
      throw new Error(`createSite: ${check.status} ${(await check.text()).slice(0, 300)}`);
    await round(url, fixture.authorization, body, true, LOAD.warmupSeconds, app.pid);
    await round(url, fixture.authorization, body, false, LOAD.warmupSeconds, app.pid);
    const runs: Record<'without' | 'with', Round[]> = { without: [], with: [] };
    for (let i = 0; i < LOAD.rounds; i++) {
      // Alternating which goes first, so neither always follows the other's writes.
      const order: ('without' | 'with')[] = i % 2 === 0 ? ['without', 'with'] : ['with', 'without'];
      for (const mode of order) {
        const r = await round(url, fixture.authorization, body, mode === 'with', LOAD.roundSeconds, app.pid);
        console.log(
          `round ${i + 1} ${mode.padEnd(7)} ${(r.requests / LOAD.roundSeconds).toFixed(0)} req/s, ${r.non2xx} non-2xx`,
        );
        runs[mode].push(r);
      }
    }
    const summarise = (rounds: Round[]) => {
      const latencies = Float64Array.from(rounds.flatMap((r) => r.latenciesMs)).sort();
      const requests = rounds.reduce((n, r) => n + r.requests, 0);
      const cpu = rounds.every((r) => r.cpuSeconds !== null)
        ? rounds.reduce((n, r) => n + (r.cpuSeconds as number), 0)
        : null;
      return {
        reqPerSec: requests / (rounds.length * LOAD.roundSeconds),
        perRound: rounds.map((r) => Math.round(r.requests / LOAD.roundSeconds)),
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
        non2xx: rounds.reduce((n, r) => n + r.non2xx, 0),
        serverCpuMsPerRequest: cpu === null ? null : (cpu * 1000) / requests,
      };
    };
    const without = summarise(runs.without);
    const withKey = summarise(runs.with);
    const summary = {
      date: new Date().toISOString(),
      node: process.version,
      database: target.version,
      load: LOAD,
      uptimeBefore,
      uptimeAfter: execFileSync('uptime').toString().trim(),
      without,
      with: withKey,
      ratio: without.reqPerSec / withKey.reqPerSec,
      cpuRatio:
        without.serverCpuMsPerRequest && withKey.serverCpuMsPerRequest
          ? withKey.serverCpuMsPerRequest / without.serverCpuMsPerRequest
          : null,
    };
    fs.mkdirSync(RESULTS, { recursive: true });
    fs.writeFileSync(path.join(RESULTS, 'idempotency.json'), `${JSON.stringify(summary, null, 2)}\n`);
    const md = [
      `# Idempotency-Key on createSite (${summary.date}, ${summary.database})`,
      '',
      `Load: ${LOAD.connections} connections, ${LOAD.rounds} interleaved rounds of ${LOAD.roundSeconds} s each. Machine before: \`${uptimeBefore}\`; after: \`${summary.uptimeAfter}\`.`,
      '',
      '| mode | req/s | per round | p50 ms | p99 ms | server CPU ms/request | non-2xx |',
      '|---|---|---|---|---|---|---|',
      ...(['without', 'with'] as const).map((mode) => {
        const s = summary[mode];
        return `| ${mode} key | ${s.reqPerSec.toFixed(0)} | ${s.perRound.join(', ')} | ${s.p50Ms.toFixed(1)} | ${s.p99Ms.toFixed(1)} | ${s.serverCpuMsPerRequest?.toFixed(2) ?? 'n/a'} | ${s.non2xx} |`;
      }),
      '',
      `Throughput without / with: **${summary.ratio.toFixed(2)}x** (goal <= 1.3x); server CPU per request with / without: ${summary.cpuRatio?.toFixed(2) ?? 'n/a'}x.`,
      '',
    ].join('\n');
    fs.writeFileSync(path.join(RESULTS, 'idempotency.md'), md);
    console.log(md);
  } finally {
    for (const stop of stops.reverse()) await stop();
    await target.drop();
  }
}

await main();
