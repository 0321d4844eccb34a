import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { JOBS } from '../../src/jobs/catalog.js';
import { factories } from '../support/factories.js';
import { buildTestApp, clientFor, type StartedApp, startApp } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';

const TOKEN = 'metrics-token-0123456789abcdef';
const t = await buildTestApp();
const f = factories(t);
// The same database behind a second app that requires METRICS_TOKEN.
const guarded: StartedApp = await startApp(t.database, { env: { METRICS_TOKEN: TOKEN } });
after(() => guarded.close());

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match?.[1] && match[3], `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key = '', value = ''] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key] = value;
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The one sample of `name` whose labels include `labels` (undefined when none). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
  return found[0]?.value;
}

async function scrape(): Promise<Sample[]> {
  const res = await t.anonymous.get('/metrics');
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parse(res.raw.body);
}

async function fault(operation: string, count: number) {
  const res = await t.admin.post('/admin/v1/faults', { operation, count, mode: 'fail' });
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

/** Runs the next job of one queue, as a worker would (the rest stays queued). */
async function runOne(queue: string) {
  const [job] = await t.queue.fetch(queue, 1, { ignoreStartAfter: true });
  assert.ok(job, `no job in ${queue}`);
  await t.runner.runJob(queue, job);
}

describe('GET /metrics after a scenario', () => {
  it('counts requests, jobs, queues, operations, the outbox, pools, database errors and event-loop lag', async () => {
    const w = await readyWorld(t, f);
    // Requests: two sites by id (one route pattern), a 404 and a 401.
    for (let i = 0; i < 2; i++)
      assert.equal((await w.owner.client.get(`/v1/sites/${w.site.id}`)).status, 200);
    assert.equal((await w.owner.client.get(`/v1/sites/${randomUUID()}`)).status, 404);
    assert.equal((await t.anonymous.get('/v1/sites')).status, 401);
    // A backup whose first attempt fails and whose second completes; its mail stays queued.
    await fault('backup', 1);
    const created = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'metrics',
      notification_emails: ['ops@example.test'],
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await runOne('create_backup');
    await runOne('create_backup');
    assert.equal((await operationOf(w.owner.client, created)).status, 'completed');

    const s = await scrape();
    const sitesById = { route: '/v1/sites/:site_id', method: 'GET' };
    assert.ok((value(s, 'hostplane_http_requests_total', { ...sitesById, status: '200' }) ?? 0) >= 2);
    assert.equal(value(s, 'hostplane_http_requests_total', { ...sitesById, status: '404' }), 1);
    assert.ok((value(s, 'hostplane_http_requests_total', { route: '/v1/sites', status: '401' }) ?? 0) >= 1);
    assert.ok(!s.some((x) => x.labels.route?.includes(w.site.id)), 'a raw URL became a label');
    const histogram = { ...sitesById, status: '200' };
    assert.ok((value(s, 'hostplane_http_request_duration_seconds_count', histogram) ?? 0) >= 2);
    assert.ok((value(s, 'hostplane_http_request_duration_seconds_sum', histogram) ?? -1) >= 0);
    assert.ok(value(s, 'hostplane_http_request_duration_seconds_bucket', { ...histogram, le: '+Inf' }));

    for (const outcome of ['failed', 'completed']) {
      const job = { kind: 'create_backup', outcome };
      assert.equal(value(s, 'hostplane_jobs_total', job), 1, outcome);
      assert.equal(value(s, 'hostplane_job_duration_seconds_count', job), 1, outcome);
    }
    // Provisioning ran through runJobs() in readyWorld.
    assert.ok(
      (value(s, 'hostplane_jobs_total', { kind: 'provision_install', outcome: 'completed' }) ?? 0) >= 1,
    );

    // Every queue of the catalog has a depth; the backup's mail waits in mail-deliver.
    for (const queue of Object.keys(JOBS)) {
      assert.notEqual(value(s, 'hostplane_queue_waiting_jobs', { queue }), undefined, queue);
      assert.ok((value(s, 'hostplane_queue_oldest_waiting_seconds', { queue }) ?? -1) >= 0, queue);
    }
    assert.ok((value(s, 'hostplane_queue_waiting_jobs', { queue: 'mail-deliver' }) ?? 0) >= 1);
    assert.equal(value(s, 'hostplane_queue_waiting_jobs', { queue: 'create_backup' }), 0);
    assert.equal(value(s, 'hostplane_queue_active_jobs', { queue: 'create_backup' }), 0);

    assert.ok((value(s, 'hostplane_operations', { type: 'create_backup', status: 'completed' }) ?? 0) >= 1);
    assert.ok(
      (value(s, 'hostplane_operations', { type: 'provision_install', status: 'completed' }) ?? 0) >= 1,
    );
    assert.ok((value(s, 'hostplane_outbox_pending_messages') ?? 0) >= 1);
    assert.ok((value(s, 'hostplane_outbox_oldest_pending_seconds') ?? -1) >= 0);

    assert.ok((value(s, 'hostplane_db_pool_connections', { pool: 'main', state: 'total' }) ?? 0) >= 1);
    assert.equal(value(s, 'hostplane_db_pool_waiting_requests', { pool: 'main' }), 0);
    for (const kind of ['unavailable', 'query', 'connection']) {
      assert.equal(value(s, 'hostplane_db_errors_total', { kind }), 0, kind);
    }
    assert.equal(value(s, 'hostplane_metrics_query_errors_total'), 0);
    assert.ok((value(s, 'nodejs_eventloop_lag_seconds') ?? -1) >= 0);
    assert.ok((value(s, 'nodejs_eventloop_lag_p99_seconds') ?? -1) >= 0);

    // Once the mail is delivered, the outbox backlog is gone.
    await t.runJobs();
    const drained = await scrape();
    assert.equal(value(drained, 'hostplane_outbox_pending_messages'), 0);
    assert.equal(value(drained, 'hostplane_queue_waiting_jobs', { queue: 'mail-deliver' }), 0);
    assert.ok(
      (value(drained, 'hostplane_jobs_total', { kind: 'mail-deliver', outcome: 'completed' }) ?? 0) >= 1,
    );
  });

  it('G11 a database error inside a job step counts in hostplane_db_errors_total, and the retry completes', async () => {
    const w = await readyWorld(t, f);
    const before = value(await scrape(), 'hostplane_db_errors_total', { kind: 'query' }) ?? 0;
    // A real SQL error (23514) at the step that completes the backup: a constraint only new rows meet.
    const constraint = 'metrics_test_no_completed_backup';
    await t.database.db.execute(
      sql.raw(`alter table backups add constraint ${constraint} check (status <> 'completed') not valid`),
    );
    let created: Awaited<ReturnType<typeof w.owner.client.post>>;
    try {
      created = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
        description: 'db error',
        notification_emails: [],
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      await runOne('create_backup');
      const s = await scrape();
      assert.equal(value(s, 'hostplane_db_errors_total', { kind: 'query' }), before + 1);
      assert.notEqual((await operationOf(w.owner.client, created)).status, 'completed');
    } finally {
      await t.database.db.execute(sql.raw(`alter table backups drop constraint if exists ${constraint}`));
    }
    await runOne('create_backup');
    assert.equal((await operationOf(w.owner.client, created)).status, 'completed');
  });

  it('is served without the API credentials and outside the rate limit when METRICS_TOKEN is unset', async () => {
    const res = await clientFor(t.app, 'Basic Zm9vOmJhcg==').get('/metrics');
    assert.equal(res.status, 200);
  });
});

describe('METRICS_TOKEN', () => {
  const metricsWith = (authorization?: string) => clientFor(guarded.app, authorization).get('/metrics');

  it('G2 answers 401 without a token, with a wrong one and with Basic credentials', async () => {
    for (const authorization of [
      undefined,
      `Bearer ${TOKEN}x`,
      'Bearer wrong-token-0123456789',
      'Basic Zm9vOmJhcg==',
    ]) {
      const res = await metricsWith(authorization);
      assert.equal(res.status, 401, String(authorization));
      assert.equal(typeof res.body.message, 'string');
    }
  });

  it('answers 200 with the Bearer token', async () => {
    const res = await metricsWith(`Bearer ${TOKEN}`);
    assert.equal(res.status, 200);
    assert.ok(parse(res.raw.body).some((s) => s.name === 'hostplane_http_requests_total'));
  });
});
