// Issue 22: event to first delivery attempt, with 100 endpoints on one account.
// Run: TEST_DB=pglite npx tsx bench/webhooks.bench.ts (BENCH_EVENTS=5, BENCH_ENDPOINTS=100).
// An event is recorded in its own transaction (as a state change does), then the app's job runner
// drains the queue the way tests do (runJobs: one job at a time, no poll wait), so this measures
// the engine's path (delivery rows, jobs, ordering check, signing, POST) without a poll interval.
// BENCH_WORKERS=N (PostgreSQL, after `npm run build`): the real path instead: N `hostplane worker`
// processes with the production job settings take the deliveries (LISTEN wake-ups, their own
// concurrency); the bench only records the events, spaced BENCH_GAP_MS (default 1000) apart.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { withTransaction } from '../src/db/transaction.js';
import { factories } from '../test/support/factories.js';
import { ADMIN_TOKEN, buildTestApp, SECRET_KEY } from '../test/support/harness.js';
import { readyWorld } from '../test/support/jobs.js';
import { type Running, runCli } from '../test/support/process.js';
import { startReceiver } from '../test/support/webhooks.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 100);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 0);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 1000);
if (WORKERS > 0 && process.env.TEST_DB !== 'postgres')
  throw new Error('BENCH_WORKERS needs TEST_DB=postgres');
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

const t = await buildTestApp({ env: { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1' } });
const f = factories(t);
const w = await readyWorld(t, f);
const receiver = await startReceiver();
for (let i = 0; i < ENDPOINTS; i++) {
  const res = await w.owner.client.post(`/v1/accounts/${w.account.id}/webhook_endpoints`, {
    url: receiver.url,
  });
  if (res.status !== 201) throw new Error(JSON.stringify(res.body));
}
const workers: Running[] = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-hooks-bench-'));
for (let i = 0; i < WORKERS; i++) {
  const run = runCli(['worker'], {
    DATABASE_URL: t.databaseUrl ?? '',
    DATA_DIR: path.join(tmp, `worker-${i}`),
    HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    HOSTPLANE_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1',
  });
  await run.waitFor(/Hostplane worker is running \d+ job queues on PostgreSQL/);
  workers.push(run);
}
const arrived = async (id: string, want: number, start: number) => {
  for (;;) {
    const arrivals = receiver.requests.filter((r) => r.id === id).map((r) => r.at - start);
    if (arrivals.length >= want) return arrivals;
    if (performance.now() - start > 120_000)
      throw new Error(`${arrivals.length} of ${want} arrived in 120 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
};
const latencies: number[] = [];
for (let e = 0; e < EVENTS; e++) {
  const start = performance.now();
  const event = await withTransaction(t.database.db, (tx) =>
    t.app.services.events.record(tx, {
      account_id: w.account.id,
      install_id: w.install.id,
      type: 'disk_usage.refreshed',
      resource: { type: 'install', id: w.install.id },
      data: { bench: e },
    }),
  );
  if (WORKERS === 0) await t.runJobs();
  latencies.push(...(await arrived(event.id, ENDPOINTS, start)));
  if (WORKERS > 0) await new Promise((r) => setTimeout(r, GAP_MS));
}
console.log(
  JSON.stringify({
    db: process.env.TEST_DB ?? 'pglite',
    workers: WORKERS || 'runJobs (serial drain)',
    endpoints: ENDPOINTS,
    events: EVENTS,
    first_attempt_ms: {
      p50: Math.round(percentile(latencies, 50)),
      p99: Math.round(percentile(latencies, 99)),
      max: Math.round(Math.max(...latencies)),
    },
  }),
);
for (const run of workers) {
  run.child.kill('SIGTERM');
  await run.exited;
}
fs.rmSync(tmp, { recursive: true, force: true });
await receiver.close();
await t.close();
