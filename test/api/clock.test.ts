import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { operationOf } from '../support/jobs.js';

// Simulated work takes time on the (manual) clock here; the tests move the clock, they never sleep.
const t = await buildTestApp({
  env: {
    SIMULATED_DURATIONS:
      'provision=60,copy=300,backup=600,restore=900,measure_disk=30,purge_cache=5,move_site=60',
    PUBLIC_URL: 'https://api.example.test',
  },
});
const f = factories(t);

async function advance(seconds: number) {
  const res = await t.admin.post('/admin/v1/clock', { advance_seconds: seconds });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function activeWorld() {
  const w = await f.world();
  await t.runJobs();
  await advance(60);
  await t.runJobs();
  return w;
}

describe('the manual clock (HOSTPLANE_CLOCK=manual)', () => {
  it('I7 provisioning takes its 60 simulated seconds: pending until the clock passes them, active right after', async () => {
    const w = await f.world();
    const [op] = (await w.owner.client.get(`/v1/installs/${w.install.id}/operations`)).body.results;
    await t.runJobs();
    assert.equal((await w.owner.client.get(`/v1/operations/${op.id}`)).body.status, 'in_progress');
    await advance(59);
    await t.runJobs();
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.status, 'pending');
    const moved = await advance(1);
    assert.ok(moved.enqueued >= 1, 'the move itself enqueued the due work');
    await t.runJobs();
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.status, 'active');
    const done = await w.owner.client.get(`/v1/operations/${op.id}`);
    assert.equal(done.body.completed_at, t.clock.now().toISOString());
  });

  it('B2 a backup is requested, then in_progress with complete_time null until its duration passes, then completed', async () => {
    const w = await activeWorld();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'timed',
      notification_emails: ['ops@example.test'],
    });
    assert.equal(res.body.status, 'requested');
    const show = () => w.owner.client.get(`/v1/installs/${w.install.id}/backups/${res.body.id}`);
    await t.runJobs();
    assert.equal((await show()).body.status, 'in_progress');
    assert.equal((await show()).body.complete_time, null);
    await advance(599);
    await t.runJobs();
    assert.equal((await show()).body.status, 'in_progress');
    await advance(1);
    await t.runJobs();
    const done = (await show()).body;
    assert.equal(done.status, 'completed');
    assert.equal(done.complete_time, t.clock.now().toISOString());
  });

  it('R2 a restore waits for its checkpoint (600 s) and then its own 900 s', async () => {
    const w = await activeWorld();
    const backup = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'base',
      notification_emails: [],
    });
    await t.runJobs();
    await advance(600);
    await t.runJobs();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.body.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const checkpoint = async () =>
      (await w.owner.client.get(`/v1/installs/${w.install.id}/backups`)).body.results.find(
        (b: Json) => b.id !== backup.body.id,
      );
    assert.equal((await checkpoint()).status, 'in_progress');
    await advance(600);
    await t.runJobs();
    assert.equal((await checkpoint()).status, 'completed');
    assert.equal((await operationOf(w.owner.client, res)).status, 'in_progress');
    await advance(900);
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
  });

  it('M9 storage_refresh_expected_time is when the recalculation is expected, by the clock', async () => {
    const w = await activeWorld();
    await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    const expected = new Date(t.clock.now().getTime() + 30_000).toISOString();
    const usage = () => w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.equal((await usage()).body.storage_refresh_expected_time, expected);
    await t.runJobs();
    assert.equal((await usage()).body.storage_refresh_expected_time, expected);
    await advance(30);
    await t.runJobs();
    assert.equal((await usage()).body.storage_refresh_expected_time, null);
    assert.equal((await usage()).body.storage_update_time, expected);
  });

  it('G6 Location is an absolute URL on PUBLIC_URL', async () => {
    const w = await activeWorld();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type: 'page' });
    assert.match(
      String(res.headers.location),
      /^https:\/\/api\.example\.test\/v1\/operations\/[0-9a-f-]{36}$/,
    );
  });

  it("G6 next and previous are absolute URLs on PUBLIC_URL (not the request's host), keeping the query", async () => {
    const w = await f.world();
    await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const first = await w.owner.client.get(`/v1/installs?account_id=${w.account.id}&limit=1`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.count, 2);
    assert.equal(first.body.previous, null);
    const next = new URL(first.body.next);
    assert.equal(next.origin, 'https://api.example.test');
    assert.equal(next.pathname, '/v1/installs');
    assert.deepEqual(Object.fromEntries(next.searchParams), {
      account_id: w.account.id,
      limit: '1',
      offset: '1',
    });
    const second = await w.owner.client.get(`${next.pathname}${next.search}`);
    assert.equal(second.body.next, null);
    const previous = new URL(second.body.previous);
    assert.equal(previous.origin, 'https://api.example.test');
    assert.equal(previous.searchParams.get('offset'), '0');
  });

  it('GET /admin/v1/clock shows the time and the next due work; POST takes exactly one of advance_seconds and now', async () => {
    const w = await f.world();
    await t.runJobs(); // provisioning is now due in 60 s
    const clock = await t.admin.get('/admin/v1/clock');
    assert.equal(clock.body.mode, 'manual');
    assert.equal(clock.body.now, t.clock.now().toISOString());
    assert.ok(clock.body.next_due <= new Date(t.clock.now().getTime() + 60_000).toISOString());
    for (const body of [
      {},
      { advance_seconds: 1, now: clock.body.now },
      { advance_seconds: -5 },
      { now: 'yesterday' },
    ]) {
      const res = await t.admin.post('/admin/v1/clock', body);
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    const later = new Date(t.clock.now().getTime() + 3600_000).toISOString();
    const set = await t.admin.post('/admin/v1/clock', { now: later });
    assert.equal(set.body.now, later);
    await t.runJobs();
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.status, 'active');
  });
});

describe('test mode is off by default', async () => {
  const plain = await buildTestApp({ env: { HOSTPLANE_CLOCK: 'system', HOSTPLANE_FAULTS: 'off' } });
  it('without HOSTPLANE_CLOCK=manual the clock cannot be moved; without HOSTPLANE_FAULTS=on there are no faults (404 saying how)', async () => {
    const clock = await plain.admin.post('/admin/v1/clock', { advance_seconds: 1 });
    assert.equal(clock.status, 404);
    assert.match(clock.body.message, /HOSTPLANE_CLOCK=manual/);
    assert.equal((await plain.admin.get('/admin/v1/clock')).body.mode, 'system');
    const fault = await plain.admin.post('/admin/v1/faults', { operation: 'backup', count: 1, mode: 'fail' });
    assert.equal(fault.status, 404);
    assert.match(fault.body.message, /HOSTPLANE_FAULTS=on/);
  });
});
