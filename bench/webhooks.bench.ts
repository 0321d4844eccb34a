// Issue 22: event to first delivery attempt, with 100 endpoints on one account.
// Run: TEST_DB=pglite npx tsx bench/webhooks.bench.ts (BENCH_EVENTS=5, BENCH_ENDPOINTS=100).
// An event is recorded in its own transaction (as a state change does), then the app's job runner
// drains the queue the way tests do (runJobs: one job at a time, no poll wait), so this measures
// the engine's path (delivery rows, jobs, ordering check, signing, POST) without a poll interval.
import { performance } from 'node:perf_hooks';
import { withTransaction } from '../src/db/transaction.js';
import { factories } from '../test/support/factories.js';
import { buildTestApp } from '../test/support/harness.js';
import { readyWorld } from '../test/support/jobs.js';
import { startReceiver } from '../test/support/webhooks.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 100);
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

const t = await buildTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
const f = factories(t);
const w = await readyWorld(t, f);
const receiver = await startReceiver();
for (let i = 0; i < ENDPOINTS; i++) {
  const res = await w.owner.client.post(`/v1/accounts/${w.account.id}/webhook_endpoints`, {
    url: receiver.url,
  });
  if (res.status !== 201) throw new Error(JSON.stringify(res.body));
}
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
  await t.runJobs();
  const arrivals = receiver.requests.filter((r) => r.id === event.id).map((r) => r.at - start);
  if (arrivals.length !== ENDPOINTS) throw new Error(`${arrivals.length} of ${ENDPOINTS} arrived`);
  latencies.push(...arrivals);
}
console.log(
  JSON.stringify({
    db: process.env.TEST_DB ?? 'pglite',
    endpoints: ENDPOINTS,
    events: EVENTS,
    first_attempt_ms: {
      p50: Math.round(percentile(latencies, 50)),
      p99: Math.round(percentile(latencies, 99)),
      max: Math.round(Math.max(...latencies)),
    },
  }),
);
await receiver.close();
await t.close();
