import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { operationPath, readyInstall, readyWorld } from '../support/jobs.js';

const t = await buildTestApp();
const f = factories(t);

const refreshes = async (client: Json, installId: string) =>
  (await client.get(`/v1/installs/${installId}/operations`)).body.results.filter(
    (o: Json) => o.type === 'refresh_disk_usage',
  );

describe('refreshEnvironmentDiskUsage', () => {
  it('M7 answers 200 with a null body at once, and the recalculation runs later', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    assert.equal(res.status, 200);
    assert.equal(res.raw.body, 'null');
    assert.match(String(res.raw.headers['content-type']), /application\/json/);
    const op = await w.owner.client.get(operationPath(res));
    assert.equal(op.body.type, 'refresh_disk_usage');
    assert.equal(op.body.status, 'queued');
    await t.runJobs();
    assert.equal((await w.owner.client.get(operationPath(res))).body.status, 'completed');
  });

  it('M8 20 concurrent refreshes of one install collapse into one recalculation', async () => {
    const w = await readyWorld(t, f);
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`),
      ),
    );
    assert.deepEqual(new Set(results.map((r) => r.status)), new Set([200]));
    assert.equal(new Set(results.map((r) => r.headers.location)).size, 1, 'all point at one operation');
    assert.equal((await refreshes(w.owner.client, w.install.id)).length, 1);
    await t.runJobs();
    assert.equal(await t.app.services.faults.countApplied(w.install.id, 'measure_disk'), 1);
    // Once it is done, a new request starts a new recalculation.
    await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    await t.runJobs();
    assert.equal((await refreshes(w.owner.client, w.install.id)).length, 2);
    assert.equal(await t.app.services.faults.countApplied(w.install.id, 'measure_disk'), 2);
  });

  it('G12 an install still being provisioned is a 400 that says so', async () => {
    const w = await f.world();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    assert.equal(res.status, 400);
    assert.match(res.body.message, /still being provisioned/);
  });
});

describe('refreshAccountDiskUsage', () => {
  it('M7 M8 refreshes every active install of the account once (200 null), collapsing like single refreshes', async () => {
    const w = await readyWorld(t, f);
    const staging = await readyInstall(t, f, w, 'staging');
    await f.install(w.owner.client, w.account.id, w.site.id, 'development'); // pending: skipped
    for (let i = 0; i < 2; i++) {
      const res = await w.owner.client.post(`/v1/accounts/${w.account.id}/usage/refresh_disk_usage`);
      assert.equal(res.status, 200);
      assert.equal(res.raw.body, 'null');
    }
    assert.equal((await refreshes(w.owner.client, w.install.id)).length, 1);
    assert.equal((await refreshes(w.owner.client, staging.id)).length, 1);
    await t.runJobs();
    for (const id of [w.install.id, staging.id]) {
      const usage = await w.owner.client.get(`/v1/installs/${id}/usage`);
      assert.ok(usage.body.storage_update_time);
    }
  });
});

describe('getInstallUsageMetrics', () => {
  it('M9 storage_refresh_expected_time is set while a refresh is pending and null once done; storage_update_time is the last refresh', async () => {
    const w = await readyWorld(t, f);
    const before = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.equal(before.status, 200);
    assert.equal(before.body.storage_refresh_expected_time, null);
    assert.equal(before.body.storage_update_time, null);
    assert.equal(before.body.metrics.length, 30);
    assert.equal(before.body.metrics[0].storage_file_bytes, null);

    await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    const pending = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.ok(pending.body.storage_refresh_expected_time);
    assert.equal(pending.body.storage_update_time, null);

    await t.runJobs();
    const after = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.equal(after.body.storage_refresh_expected_time, null);
    assert.equal(after.body.storage_update_time, t.clock.now().toISOString());
    const today = after.body.metrics[0];
    assert.equal(today.date, t.clock.now().toISOString().slice(0, 10));
    assert.match(today.storage_file_bytes, /^[0-9]+$/);
    assert.match(today.storage_database_bytes, /^[0-9]+$/);
    assert.deepEqual(Object.keys(today).sort(), [
      'billable_visits',
      'date',
      'network_cdn_bytes',
      'network_origin_bytes',
      'network_total_bytes',
      'request_origin_count',
      'storage_database_bytes',
      'storage_file_bytes',
      'visit_count',
    ]);
  });

  it('C2 M9 disk usage follows copies: after copying a site over, the destination measures like the source', async () => {
    const w = await readyWorld(t, f);
    const source = await readyInstall(t, f, w, 'staging');
    const measure = async (id: string) => {
      await w.owner.client.post(`/v1/installs/${id}/usage/refresh_disk_usage`);
      await t.runJobs();
      const m = (await w.owner.client.get(`/v1/installs/${id}/usage`)).body.metrics[0];
      return [m.storage_file_bytes, m.storage_database_bytes];
    };
    const [src, dst] = [await measure(source.id), await measure(w.install.id)];
    assert.notDeepEqual(src, dst);
    await w.owner.client.post('/v1/install_copy', {
      source_environment_id: source.id,
      destination_environment_id: w.install.id,
    });
    await t.runJobs();
    assert.deepEqual(await measure(w.install.id), src);
  });

  it('M1 M2 first_date and last_date come together and span at most 31 days (400 otherwise)', async () => {
    const w = await readyWorld(t, f);
    const url = `/v1/installs/${w.install.id}/usage`;
    const one = await w.owner.client.get(`${url}?first_date=2025-01-01`);
    expectFieldError(one, 'last_date');
    const today = t.clock.now();
    const iso = (d: Date) => d.toISOString().slice(0, 10);
    const first = new Date(today.getTime() - 31 * 86_400_000);
    const long = await w.owner.client.get(`${url}?first_date=${iso(first)}&last_date=${iso(today)}`);
    assert.equal(long.status, 400);
    const ok = await w.owner.client.get(
      `${url}?first_date=${iso(new Date(first.getTime() + 86_400_000))}&last_date=${iso(today)}`,
    );
    assert.equal(ok.status, 200);
    assert.equal(ok.body.metrics.length, 31);
    const malformed = await w.owner.client.get(`${url}?first_date=01/02/2025&last_date=2025-01-03`);
    assert.equal(malformed.status, 400);
  });
});
