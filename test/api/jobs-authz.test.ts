import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, clientFor, type Json, type Method, type TestApp } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';

const t: TestApp = await buildTestApp();
const f = factories(t);

/** An account with two active installs, a completed backup and an operation: every new route's target. */
async function scene() {
  const w = await readyWorld(t, f);
  const staging = await readyInstall(t, f, w, 'staging');
  const backup = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'authz',
    notification_emails: [],
  });
  assert.equal(backup.status, 202);
  await t.runJobs();
  const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
  return { w, staging, backupId: backup.body.id as string, operationId: ops.body.results[0].id as string };
}

interface Route {
  operationId: string;
  method: Method;
  url: string;
  body?: Json;
  /** The status a member allowed to act gets. */
  ok: number;
}

function routes(s: Awaited<ReturnType<typeof scene>>): Route[] {
  const i = s.w.install.id;
  return [
    { operationId: 'getOperation', method: 'GET', url: `/v1/operations/${s.operationId}`, ok: 200 },
    { operationId: 'listInstallOperations', method: 'GET', url: `/v1/installs/${i}/operations`, ok: 200 },
    { operationId: 'listBackups', method: 'GET', url: `/v1/installs/${i}/backups`, ok: 200 },
    { operationId: 'showBackup', method: 'GET', url: `/v1/installs/${i}/backups/${s.backupId}`, ok: 200 },
    { operationId: 'getInstallUsageMetrics', method: 'GET', url: `/v1/installs/${i}/usage`, ok: 200 },
    {
      operationId: 'createBackup',
      method: 'POST',
      url: `/v1/installs/${i}/backups`,
      body: { description: 'x', notification_emails: [] },
      ok: 202,
    },
    {
      operationId: 'restoreBackup',
      method: 'POST',
      url: `/v1/installs/${i}/backups/${s.backupId}/restore`,
      body: { notification_emails: [] },
      ok: 202,
    },
    {
      operationId: 'copyInstall',
      method: 'POST',
      url: '/v1/install_copy',
      body: { source_environment_id: s.staging.id, destination_environment_id: i },
      ok: 202,
    },
    {
      operationId: 'refreshEnvironmentDiskUsage',
      method: 'POST',
      url: `/v1/installs/${i}/usage/refresh_disk_usage`,
      ok: 200,
    },
    {
      operationId: 'refreshAccountDiskUsage',
      method: 'POST',
      url: `/v1/accounts/${s.w.account.id}/usage/refresh_disk_usage`,
      ok: 200,
    },
    {
      operationId: 'purgeCache',
      method: 'POST',
      url: `/v1/installs/${i}/purge_cache`,
      body: { type: 'page' },
      ok: 202,
    },
  ];
}

describe('authorization of every job route', async () => {
  const s = await scene();
  const foreign = await readyWorld(t, f);
  const outsider = await f.user([
    { account_id: s.w.account.id, roles: 'partial', install_ids: [s.staging.id] },
  ]);
  const wrongPassword = clientFor(t.app, basic(s.w.owner.username, 'not-the-password'));

  for (const route of routes(s)) {
    it(`G2 ${route.operationId}: no credentials or a wrong password is 401`, async () => {
      for (const client of [t.anonymous, wrongPassword]) {
        const res = await client.request(route.method, route.url, route.body);
        assert.equal(res.status, 401, `${route.operationId} ${JSON.stringify(res.body)}`);
        assert.deepEqual(res.body, { message: 'Bad Credentials' });
      }
    });

    it(`G4 ${route.operationId}: another account's owner gets 404`, async () => {
      const res = await foreign.owner.client.request(route.method, route.url, route.body);
      assert.equal(res.status, 404, `${route.operationId} ${JSON.stringify(res.body)}`);
      assert.deepEqual(res.body, { message: 'Not Found' });
    });

    // A2: a partial member outside install_ids does not see the install (the account route is a 403).
    const partialStatus = route.operationId === 'refreshAccountDiskUsage' ? 403 : 404;
    it(`A2 ${route.operationId}: a partial member outside its install_ids gets ${partialStatus}`, async () => {
      const res = await outsider.client.request(route.method, route.url, route.body);
      assert.equal(res.status, partialStatus, `${route.operationId} ${JSON.stringify(res.body)}`);
    });
  }

  it('A2 a partial member may operate on its installs (copy needs both), but not refresh the account (403)', async () => {
    const partial = await f.user([
      { account_id: s.w.account.id, roles: 'partial', install_ids: [s.w.install.id, s.staging.id] },
    ]);
    for (const route of routes(s)) {
      const res = await partial.client.request(route.method, route.url, route.body);
      const expected = route.operationId === 'refreshAccountDiskUsage' ? 403 : route.ok;
      assert.equal(res.status, expected, `${route.operationId} ${JSON.stringify(res.body)}`);
      if (expected === 403) {
        assert.deepEqual(res.body, { message: "You don't have permission to perform this action" });
      }
      await t.runJobs();
    }
    const onlyDestination = await f.user([
      { account_id: s.w.account.id, roles: 'partial', install_ids: [s.w.install.id] },
    ]);
    const copy = await onlyDestination.client.post('/v1/install_copy', {
      source_environment_id: s.staging.id,
      destination_environment_id: s.w.install.id,
    });
    assert.equal(copy.status, 404);
  });

  it('A1 every full role acts on every route', async () => {
    for (const roles of ['owner', 'full', 'full,billing'] as const) {
      const member = await f.user([{ account_id: s.w.account.id, roles }]);
      for (const route of routes(s)) {
        const res = await member.client.request(route.method, route.url, route.body);
        const ok = route.operationId === 'purgeCache' ? [202, 429] : [route.ok];
        assert.ok(
          ok.includes(res.status),
          `${roles} ${route.operationId} ${res.status} ${JSON.stringify(res.body)}`,
        );
        await t.runJobs();
      }
    }
  });
});

describe('authorization of the admin test surface', () => {
  for (const [method, url, body] of [
    ['GET', '/admin/v1/clock', undefined],
    ['POST', '/admin/v1/clock', { advance_seconds: 1 }],
    ['POST', '/admin/v1/faults', { operation: 'backup', count: 1, mode: 'fail' }],
    ['GET', '/admin/v1/faults', undefined],
    ['GET', '/admin/v1/mail', undefined],
  ] as [Method, string, Json][]) {
    it(`${method} ${url} needs the admin Bearer token (401 without it, or with Basic credentials)`, async () => {
      const w = await f.world();
      for (const client of [t.anonymous, w.owner.client, clientFor(t.app, 'Bearer wrong-token-0000000000')]) {
        const res = await client.request(method, url, body);
        assert.equal(res.status, 401);
      }
      const ok = await t.admin.request(method, url, body);
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      if (url === '/admin/v1/faults' && method === 'POST') {
        await t.admin.post('/admin/v1/faults', { operation: 'backup', count: 0, mode: 'fail' });
      }
    });
  }
});
