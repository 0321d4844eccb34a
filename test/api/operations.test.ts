import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';

const t = await buildTestApp();
const f = factories(t);
const MISSING = '00000000-0000-4000-8000-000000000000';

describe('install provisioning (I7)', () => {
  it('I7 a new install is pending until its provisioning job makes it active', async () => {
    const w = await f.world();
    assert.equal(w.install.status, 'pending');
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    assert.equal(ops.status, 200);
    assert.equal(ops.body.count, 1);
    const [op] = ops.body.results;
    assert.equal(op.type, 'provision_install');
    assert.equal(op.status, 'queued');
    assert.deepEqual(op.resource, { type: 'install', id: w.install.id });
    assert.equal(op.started_at, null);

    assert.equal(await t.runJobs(), 1);
    const got = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(got.body.status, 'active');
    const done = await w.owner.client.get(`/v1/operations/${op.id}`);
    assert.equal(done.body.status, 'completed');
    assert.ok(done.body.started_at && done.body.completed_at);
    assert.equal(done.body.error, null);
    // Running the jobs again does nothing: the work is done once.
    assert.equal(await t.runJobs(), 0);
  });

  it('I7 installs loaded by operators (admin API, seed) are active at once', async () => {
    const res = await t.app.services.installs.adminCreate({
      account_id: (await f.account({ sites_enabled: false })).id,
      name: `op${Date.now().toString(36)}`,
    });
    assert.equal(res.status, 'active');
  });

  it('I7 a failed provisioning leaves the install pending and the operation failed with its reason', async () => {
    const w = await f.world();
    await t.admin.post('/admin/v1/faults', { operation: 'provision', count: 10, mode: 'fail' });
    try {
      await t.runJobs();
    } finally {
      await t.admin.post('/admin/v1/faults', { operation: 'provision', count: 0, mode: 'fail' });
    }
    const got = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(got.body.status, 'pending');
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    assert.equal(ops.body.results[0].status, 'failed');
    assert.match(ops.body.results[0].error, /Provisioning failed: simulated provision failure/);
  });
});

describe('getOperation and listInstallOperations (Hostplane extension)', () => {
  it('shows an operation with exactly its documented fields', async () => {
    const w = await readyWorld(t, f);
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const op = await w.owner.client.get(`/v1/operations/${ops.body.results[0].id}`);
    assert.equal(op.status, 200);
    assert.deepEqual(Object.keys(op.body).sort(), [
      'completed_at',
      'created_at',
      'error',
      'id',
      'resource',
      'started_at',
      'status',
      'type',
    ]);
  });

  it('G5 G6 lists an install’s operations newest first, paginated with absolute URLs', async () => {
    const w = await readyWorld(t, f);
    for (const type of ['object', 'page', 'cdn']) {
      t.clock.advance(1000);
      const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type });
      assert.equal(res.status, 202);
    }
    const page = await w.owner.client.get(`/v1/installs/${w.install.id}/operations?limit=2`);
    assert.equal(page.body.count, 4);
    assert.deepEqual(
      page.body.results.map((o: { type: string }) => o.type),
      ['purge_cache', 'purge_cache'],
    );
    assert.equal(new URL(page.body.next).searchParams.get('offset'), '2');
    const rest = await w.owner.client.get(new URL(page.body.next).pathname + new URL(page.body.next).search);
    assert.deepEqual(
      rest.body.results.map((o: { type: string }) => o.type),
      ['purge_cache', 'provision_install'],
    );
    const bad = await w.owner.client.get(`/v1/installs/${w.install.id}/operations?limit=101`);
    assert.equal(bad.status, 400);
  });

  it('the OpenAPI document names every new operation, and every 202 documents its Location header', async () => {
    const doc = (await t.anonymous.get('/v1/swagger')).body;
    const ops = Object.values(
      doc.paths as Record<
        string,
        Record<
          string,
          { operationId: string; responses: Record<string, { headers?: Record<string, unknown> }> }
        >
      >,
    ).flatMap((item) => Object.values(item));
    const ids = new Set(ops.map((o) => o.operationId));
    for (const id of [
      'getOperation',
      'listInstallOperations',
      'copyInstall',
      'createBackup',
      'listBackups',
      'showBackup',
      'restoreBackup',
      'refreshEnvironmentDiskUsage',
      'refreshAccountDiskUsage',
      'getInstallUsageMetrics',
      'purgeCache',
      'createSiteTransfer',
      'adminGetClock',
      'adminMoveClock',
      'adminSetFault',
      'adminListMail',
    ]) {
      assert.ok(ids.has(id), id);
    }
    const accepted = ops.filter((o) => o.responses['202']).map((o) => o.operationId);
    // The 202s that start an operation carry its URL in Location (G10); checkStatus answers its
    // report id and the offload settings their stored value (issue 13), as the reference has them.
    const withOperation = [
      'copyInstall',
      'createBackup',
      'restoreBackup',
      'purgeCache',
      'createSiteTransfer',
      'createDomainCertificateOrder',
      // Issue 30: an install's move to another hosting server (admin).
      'adminMoveInstall',
    ];
    // Issue 22: a webhook ping or redelivery answers 202 with the queued delivery (its own record,
    // followed in the endpoint's delivery log), not an operation.
    const withDelivery = ['pingWebhookEndpoint', 'redeliverWebhookDelivery'];
    assert.deepEqual(
      [...accepted].sort(),
      [
        ...withOperation,
        ...withDelivery,
        'checkStatus',
        'updateOffloadSettings',
        'patchOffloadSettings',
      ].sort(),
    );
    for (const o of ops.filter((op) => withOperation.includes(op.operationId)))
      assert.ok(o.responses['202']?.headers?.location, o.operationId);
  });

  it('G4 an unknown operation is 404; a malformed id is 400 (G7)', async () => {
    const w = await readyWorld(t, f);
    const missing = await w.owner.client.get(`/v1/operations/${MISSING}`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { message: 'Not Found' });
    const malformed = await w.owner.client.get('/v1/operations/nope');
    expectFieldError(malformed, 'operation_id', 'invalid_value');
  });
});
