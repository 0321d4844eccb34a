import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { rowCounts as countRows } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Client, type Json, type Res } from '../support/harness.js';

// Issue 22: the audit log (http/audit.ts, modules/audit/) and dry runs. That every mutating route of
// the public API writes one event when it succeeds and none when it is refused is asserted route by
// route in the shared authorization suite (security.test.ts, "A1 ... can" / "G3 ... cannot").
const t = await buildTestApp();
const f = factories(t);

async function world() {
  const w = await f.world();
  await t.runJobs();
  return w;
}

async function eventsOf(client: Client, accountId: string, query = ''): Promise<Res> {
  const res = await client.get(`/v1/accounts/${accountId}/audit_events${query}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res;
}

const byRequest = (res: Res) => String(res.headers['x-request-id']);

/** Rows of every table of the database (the app's and the job engine's). */
const rowCounts = () => countRows(t.database.db);

describe('issue 22 audit log', () => {
  it('AU1 a change records actor, IP, request id, the resource and only the changed fields before and after', async () => {
    const w = await world();
    const res = await w.owner.client.patch(`/v1/sites/${w.site.id}`, { name: 'Renamed site' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const list = await eventsOf(w.owner.client, w.account.id, '?action=updateSite');
    assert.equal(list.body.count, 1);
    const event = list.body.results[0];
    assert.equal(event.request_id, byRequest(res));
    assert.deepEqual(event.actor, {
      type: 'user',
      user_id: w.owner.userId,
      credential_id: null,
      ip: '127.0.0.1',
    });
    assert.deepEqual(event.resource, { type: 'site', id: w.site.id });
    assert.equal(event.method, 'PATCH');
    assert.equal(event.path, '/v1/sites/:site_id');
    assert.equal(event.status, 200);
    assert.deepEqual(event.before, { name: w.site.name });
    assert.deepEqual(event.after, { name: 'Renamed site' });
  });

  it('AU1 an asynchronous call records the operation it started; a scoped credential is named', async () => {
    const w = await world();
    const made = await w.owner.client.post(`/v1/accounts/${w.account.id}/credentials`, { scope: 'operate' });
    assert.equal(made.status, 201);
    const { clientFor, basic } = await import('../support/harness.js');
    const cred = clientFor(t.app, basic(made.body.username, made.body.password));
    const backup = await cred.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'ci',
      notification_emails: ['ci@example.test'],
    });
    assert.equal(backup.status, 202, JSON.stringify(backup.body));
    const operationId = String(backup.headers.location).split('/').pop();
    const list = await eventsOf(w.owner.client, w.account.id, `?credential_id=${made.body.id}`);
    assert.equal(list.body.count, 1);
    assert.equal(list.body.results[0].action, 'createBackup');
    assert.equal(list.body.results[0].operation_id, operationId);
    assert.equal(list.body.results[0].actor.credential_id, made.body.id);
  });

  it('AU2 secrets and keys are never recorded (a credential made, a password issued by the admin API)', async () => {
    const w = await world();
    const made = await w.owner.client.post(`/v1/accounts/${w.account.id}/credentials`, { scope: 'read' });
    const issued = await t.admin.post(`/admin/v1/users/${w.owner.userId}/credentials`);
    assert.equal(issued.status, 201);
    const rows = await queryRows<{ text: string }>(
      t.database.db,
      sql`select coalesce(before::text, '') || coalesce(after::text, '') as text from audit_events
          where request_id in (${byRequest(made)}, ${byRequest(issued)})`,
    );
    assert.equal(rows.length, 2);
    for (const { text } of rows) {
      assert.equal(text.includes(made.body.password), false);
      assert.equal(text.includes(issued.body.password), false);
      assert.ok(text.includes('[redacted]'), text);
    }
  });

  it('AU3 the admin API is audited too (actor admin, the account of the resource)', async () => {
    const w = await world();
    const res = await t.admin.patch(`/admin/v1/installs/${w.install.id}`, { stable_ips: null });
    assert.ok(res.status < 300, JSON.stringify(res.body));
    const list = await eventsOf(w.owner.client, w.account.id, '?action=adminUpdateInstall');
    assert.equal(list.body.count, 1);
    assert.deepEqual(list.body.results[0].actor, {
      type: 'admin',
      user_id: null,
      credential_id: null,
      ip: '127.0.0.1',
    });
  });

  it('AU4 filters by actor, resource, action and time, newest first, paginated; owners only', async () => {
    const w = await world();
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    // The world's own events happen at `before`; these two a second and two seconds later.
    const before = new Date(t.clock.now().getTime() + 500).toISOString();
    t.clock.advance(1000);
    await full.client.patch(`/v1/sites/${w.site.id}`, { name: 'One' });
    t.clock.advance(1000);
    await w.owner.client.patch(`/v1/sites/${w.site.id}`, { name: 'Two' });
    const all = await eventsOf(
      w.owner.client,
      w.account.id,
      `?resource_type=site&resource_id=${w.site.id}&action=updateSite`,
    );
    assert.deepEqual(
      all.body.results.map((e: Json) => e.after?.name),
      ['Two', 'One'],
    );
    const mine = await eventsOf(w.owner.client, w.account.id, `?actor_user_id=${full.userId}`);
    assert.deepEqual(
      mine.body.results.map((e: Json) => e.after?.name),
      ['One'],
    );
    const since = await eventsOf(w.owner.client, w.account.id, `?since=${encodeURIComponent(before)}`);
    assert.equal(since.body.count, 2);
    const until = await eventsOf(
      w.owner.client,
      w.account.id,
      `?until=${encodeURIComponent(before)}&action=updateSite`,
    );
    assert.equal(until.body.count, 0);
    const page = await eventsOf(w.owner.client, w.account.id, '?limit=1&action=updateSite');
    assert.equal(page.body.results.length, 1);
    assert.equal(page.body.count, 2);
    assert.ok(page.body.next);
    assert.equal((await full.client.get(`/v1/accounts/${w.account.id}/audit_events`)).status, 403);
    assert.equal(
      (await w.owner.client.get(`/v1/accounts/${w.account.id}/audit_events?since=yesterday`)).status,
      400,
    );
  });

  it('AU5 events older than 13 months are swept; metrics count what the log did', async () => {
    const w = await world();
    const old = await w.owner.client.patch(`/v1/sites/${w.site.id}`, { name: 'Old' });
    t.clock.advance(397 * 86_400_000);
    const fresh = await w.owner.client.patch(`/v1/sites/${w.site.id}`, { name: 'New' });
    const ids = await queryRows<{ request_id: string }>(
      t.database.db,
      sql`select request_id from audit_events where request_id in (${byRequest(old)}, ${byRequest(fresh)})`,
    );
    assert.deepEqual(
      ids.map((r) => r.request_id),
      [byRequest(fresh)],
    );
    const metrics = await t.anonymous.get('/metrics');
    assert.match(String(metrics.body), /hostplane_audit_events_total\{outcome="recorded"\} [1-9]/);
    assert.match(String(metrics.body), /hostplane_audit_events_unfinished \d/);
    assert.match(String(metrics.body), /hostplane_scoped_credential_refused_total\{reason="expired"\} \d/);
  });
});

// Issue 22: dry runs. Each route: the real call's checks answer as the real call would (404, 403),
// and a dry run that passes them answers 200 with what would happen while every table keeps its rows.
const DRY_RUNS: {
  operationId: string;
  method: 'DELETE' | 'POST' | 'PATCH';
  url: (w: Json) => string;
  expect: (body: Json, w: Json) => void;
}[] = [
  {
    operationId: 'deleteInstall',
    method: 'DELETE',
    url: (w) => `/v1/installs/${w.install.id}`,
    expect: (body, w) => {
      assert.equal(body.dry_run, true);
      assert.equal(body.install_id, w.install.id);
      assert.equal(body.operation, 'deprovision_install');
      assert.ok(body.domains_that_would_stop_serving.includes(w.install.cname), JSON.stringify(body));
    },
  },
];

describe('issue 22 dry runs write nothing', () => {
  for (const route of DRY_RUNS) {
    it(`DR1 ${route.operationId}?dry_run=true answers what it would do; every table keeps its row count`, async () => {
      const w = await world();
      const before = await rowCounts();
      const res = await w.owner.client.request(route.method, `${route.url(w)}?dry_run=true`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      route.expect(res.body, w);
      assert.deepEqual(await rowCounts(), before);
    });

    it(`DR2 ${route.operationId}?dry_run=true runs the real call's checks (404 foreign, 403 role)`, async () => {
      const w = await world();
      const stranger = await world();
      const partial = await f.user([
        { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
      ]);
      const before = await rowCounts();
      assert.equal(
        (await stranger.owner.client.request(route.method, `${route.url(w)}?dry_run=true`)).status,
        404,
      );
      assert.equal((await partial.client.request(route.method, `${route.url(w)}?dry_run=true`)).status, 403);
      assert.deepEqual(await rowCounts(), before);
    });
  }
});
