/**
 * Job start latency: the time from a createBackup response reaching the client to its job starting
 * (the operation's started_at, set by the handler when it begins). 200 backups, one at a time, so
 * nothing queues behind anything; on PGlite (serve), PostgreSQL (serve) and PostgreSQL with the API
 * and a separate `hostplane worker` process. Run: `npm run bench:jobs` (see bench/jobs.README.md).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { operations } from '../src/db/schema.js';
import { type ProcessRole, start } from '../src/main.js';

const N = Number(process.env.BENCH_JOBS ?? 200);
const WARMUP = 10;
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';
const ADMIN_TOKEN = 'bench-admin-token-0123456789';
const INSTANT = 'provision=0,copy=0,backup=0,restore=0,measure_disk=0,purge_cache=0,move_site=0';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? Number.NaN;
}

async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `hp_bench_jobs_${process.pid}`;
  const admin = new pg.Client({ connectionString: `${PG_URL}/postgres` });
  await admin.connect();
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  try {
    return await fn(`${PG_URL}/${name}`);
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

async function measure(
  label: string,
  env: Record<string, string>,
  role: ProcessRole,
  separateWorker: boolean,
) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-bench-'));
  const fullEnv = {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    SIMULATED_DURATIONS: INSTANT,
    ...env,
  };
  const lines: string[] = [];
  const running = await start(loadConfig(fullEnv), role, (line) => lines.push(line));
  const worker = separateWorker
    ? spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'worker'], {
        env: { PATH: process.env.PATH ?? '', ...fullEnv, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
    : null;
  if (worker) {
    await new Promise<void>((resolve) =>
      worker.stdout?.on('data', (c: Buffer) => c.toString().includes('worker is running') && resolve()),
    );
  }
  try {
    const curl = lines.map((l) => /curl -u '([^:]+):([^']+)' '([^']+)'/.exec(l)).find(Boolean);
    if (!curl) throw new Error(`no demo credentials in:\n${lines.join('\n')}`);
    const base = new URL(curl[3] ?? '').origin;
    const headers = {
      authorization: `Basic ${Buffer.from(`${curl[1]}:${curl[2]}`).toString('base64')}`,
      'content-type': 'application/json',
    };
    const installs = (await (await fetch(`${base}/v1/installs`, { headers })).json()) as {
      results: { id: string }[];
    };
    const installId = installs.results[0]?.id;
    const db = running.database.db;
    const samples: number[] = [];
    const responses: number[] = [];
    for (let i = 0; i < WARMUP + N; i++) {
      const sent = Date.now();
      const res = await fetch(`${base}/v1/installs/${installId}/backups`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ description: `bench ${i}`, notification_emails: [] }),
      });
      const answered = Date.now();
      if (res.status !== 202) throw new Error(`createBackup answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
      const opId = new URL(res.headers.get('location') ?? '').pathname.split('/').pop() ?? '';
      let startedAt: Date | null = null;
      for (let waited = 0; !startedAt; waited++) {
        const [row] = await db
          .select({ started: operations.started_at })
          .from(operations)
          .where(eq(operations.id, opId));
        startedAt = row?.started ?? null;
        if (!startedAt) {
          if (waited > 5000) throw new Error(`operation ${opId} never started`);
          await sleep(2);
        }
      }
      if (i >= WARMUP) {
        samples.push(startedAt.getTime() - answered);
        responses.push(answered - sent);
      }
    }
    const sorted = [...samples].sort((a, b) => a - b);
    const responseSorted = [...responses].sort((a, b) => a - b);
    const result = {
      label,
      jobs: N,
      p50_ms: percentile(sorted, 50),
      p90_ms: percentile(sorted, 90),
      p99_ms: percentile(sorted, 99),
      min_ms: sorted[0],
      max_ms: sorted.at(-1),
      started_before_response: samples.filter((s) => s <= 0).length,
      response_p50_ms: percentile(responseSorted, 50),
      response_p99_ms: percentile(responseSorted, 99),
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    worker?.kill('SIGTERM');
    await running.shutdown('bench');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const results = [];
results.push(await measure('PGlite, hostplane serve', {}, 'serve', false));
results.push(
  await withDatabase((url) => measure('PostgreSQL, hostplane serve', { DATABASE_URL: url }, 'serve', false)),
);
results.push(
  await withDatabase((url) =>
    measure('PostgreSQL, hostplane api + hostplane worker', { DATABASE_URL: url }, 'api', true),
  ),
);
console.log(
  '\n| setup | jobs | p50 ms | p90 ms | p99 ms | max ms | started before the response | response p50 / p99 ms |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(
    `| ${r.label} | ${r.jobs} | ${r.p50_ms} | ${r.p90_ms} | ${r.p99_ms} | ${r.max_ms} | ${r.started_before_response} | ${r.response_p50_ms} / ${r.response_p99_ms} |`,
  );
}
process.exit(0);
