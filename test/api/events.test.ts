import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { events } from '../../src/db/schema.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';

// Issue 22: GET /v1/accounts/{account_id}/events, written in the transactions of the state changes.
const t = await buildTestApp();
const f = factories(t);
const DAY = 86_400_000;

const eventsUrl = (accountId: string, query = '') => `/v1/accounts/${accountId}/events${query}`;

async function backup(w: Json, installId = w.install.id) {
  const res = await w.owner.client.post(`/v1/installs/${installId}/backups`, {
    description: 'events',
    notification_emails: [],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await t.runJobs();
  return res.body;
}

describe('events (issue 22)', () => {
  it('a provisioned install and a backup write install.provisioned, backup.started, backup.completed and operation.completed, newest first', async () => {
    const w = await readyWorld(t, f);
    const made = await backup(w);
    const res = await w.owner.client.get(eventsUrl(w.account.id));
    assert.equal(res.status, 200);
    const types = res.body.results.map((e: Json) => e.type);
    assert.deepEqual(types, [
      'operation.completed',
      'backup.completed',
      'backup.started',
      'operation.completed',
      'install.provisioned',
    ]);
    assert.equal(res.body.has_more, false);
    assert.equal(res.body.next, null);
    const completed = res.body.results[1];
    assert.deepEqual(Object.keys(completed).sort(), [
      'account_id',
      'created_at',
      'data',
      'id',
      'install_id',
      'resource',
      'type',
    ]);
    assert.deepEqual(completed.resource, { type: 'backup', id: made.id });
    assert.equal(completed.install_id, w.install.id);
    assert.equal(completed.data.operation_type, 'create_backup');
    assert.equal(completed.data.status, 'completed');
  });

  it('a failed backup writes backup.failed and operation.failed with the error', async () => {
    const w = await readyWorld(t, f);
    const fault = await t.admin.post('/admin/v1/faults', { operation: 'backup', count: 10, mode: 'fail' });
    assert.equal(fault.status, 200);
    await backup(w);
    await t.admin.post('/admin/v1/faults', { operation: 'backup', count: 0, mode: 'fail' });
    const res = await w.owner.client.get(
      eventsUrl(w.account.id, '?type=backup.failed&type=operation.failed'),
    );
    assert.deepEqual(
      res.body.results.map((e: Json) => e.type),
      ['operation.failed', 'backup.failed'],
    );
    for (const e of res.body.results) assert.equal(typeof e.data.error, 'string');
  });

  it('cursor: starting_after pages through newest first with no overlap; next carries the cursor', async () => {
    const w = await readyWorld(t, f);
    await backup(w);
    await backup(w);
    const all = (await w.owner.client.get(eventsUrl(w.account.id))).body.results.map((e: Json) => e.id);
    assert.equal(all.length, 8);
    const seen: string[] = [];
    let url: string | null = eventsUrl(w.account.id, '?limit=3');
    while (url) {
      const page = await w.owner.client.get(url);
      assert.equal(page.status, 200);
      assert.ok(page.body.results.length <= 3);
      seen.push(...page.body.results.map((e: Json) => e.id));
      if (page.body.has_more) {
        assert.equal(new URL(page.body.next).searchParams.get('starting_after'), seen.at(-1));
        url = new URL(page.body.next).pathname + new URL(page.body.next).search;
      } else url = null;
    }
    assert.deepEqual(seen, all);
  });

  it('filters: type, install_id and resource_id; partial members see only their installs', async () => {
    const w = await readyWorld(t, f);
    const other = await readyInstall(t, f, w);
    const b = await backup(w, other.id);
    const byInstall = await w.owner.client.get(eventsUrl(w.account.id, `?install_id=${other.id}`));
    assert.ok(byInstall.body.results.length >= 4);
    assert.ok(byInstall.body.results.every((e: Json) => e.install_id === other.id));
    const byResource = await w.owner.client.get(eventsUrl(w.account.id, `?resource_id=${b.id}`));
    assert.deepEqual(
      byResource.body.results.map((e: Json) => e.type),
      ['backup.completed', 'backup.started'],
    );
    const byType = await w.owner.client.get(eventsUrl(w.account.id, '?type=install.provisioned'));
    assert.deepEqual(
      byType.body.results.map((e: Json) => e.install_id).sort(),
      [w.install.id, other.id].sort(),
    );
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const seen = await partial.client.get(eventsUrl(w.account.id));
    assert.equal(seen.status, 200);
    assert.ok(seen.body.results.length > 0);
    assert.ok(seen.body.results.every((e: Json) => e.install_id === w.install.id));
  });

  it('bad input: an unknown type or a malformed cursor is a 400, a cursor of another account a 400, a foreign account a 404', async () => {
    const w = await readyWorld(t, f);
    const other = await readyWorld(t, f);
    const foreignEvent = (await other.owner.client.get(eventsUrl(other.account.id))).body.results[0];
    assert.equal((await w.owner.client.get(eventsUrl(w.account.id, '?type=nope'))).status, 400);
    assert.equal((await w.owner.client.get(eventsUrl(w.account.id, '?starting_after=x'))).status, 400);
    assert.equal((await w.owner.client.get(eventsUrl(w.account.id, '?limit=101'))).status, 400);
    const cross = await w.owner.client.get(eventsUrl(w.account.id, `?starting_after=${foreignEvent.id}`));
    assert.equal(cross.status, 400);
    assert.equal(cross.body.errors[0].field, 'starting_after');
    assert.equal((await w.owner.client.get(eventsUrl(other.account.id))).status, 404);
  });

  // Last: it moves the clock 31 days.
  it('30-day window: older events are not listed, and the sweep deletes them', async () => {
    const w = await readyWorld(t, f);
    const before = (await w.owner.client.get(eventsUrl(w.account.id))).body.results;
    assert.ok(before.length > 0);
    t.clock.advance(29 * DAY);
    assert.equal((await w.owner.client.get(eventsUrl(w.account.id))).body.results.length, before.length);
    t.clock.advance(2 * DAY);
    const after = await w.owner.client.get(eventsUrl(w.account.id));
    assert.deepEqual(after.body.results, []);
    await t.app.services.events.sweep(true);
    const rows = await t.database.db
      .select({ id: events.id })
      .from(events)
      .where(eq(events.account_id, w.account.id));
    assert.deepEqual(rows, []);
  });
});
