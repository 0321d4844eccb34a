import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { events } from '../../src/db/schema.js';
import { withTransaction } from '../../src/db/transaction.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';
import { b64, createPki } from '../support/pki.js';
import { createSchedule, deleteSchedules, reportsOf } from '../support/reports.js';

// Issue 22: GET /v1/accounts/{account_id}/events, written in the transactions of the state changes.
// Domain verification asks a real DNS server on a local port (DNS_SERVERS).
const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '250', DNS_TRIES: '1' } });
const f = factories(t);
const DAY = 86_400_000;
const HOUR = 3_600_000;

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

/** The account's events of `type` (newest first), through the API's type filter. */
async function eventsOf(w: Json, type: string): Promise<Json[]> {
  const res = await w.owner.client.get(eventsUrl(w.account.id, `?type=${type}&limit=100`));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.results;
}

/** Exactly one event of `type` about `resourceId`: returned. */
async function onlyEvent(w: Json, type: string, resourceId: string): Promise<Json> {
  const found = await eventsOf(w, type);
  assert.equal(found.length, 1, `${type}: ${JSON.stringify(found)}`);
  const [event] = found;
  assert.equal(event.resource.id, resourceId);
  assert.equal(event.account_id, w.account.id);
  return event;
}

const usersOf = (accountId: string) => `/v1/accounts/${accountId}/account_users`;
const invite = (w: Json, email: string) =>
  w.owner.client.post(usersOf(w.account.id), {
    user: { account_id: w.account.id, first_name: 'Ada', last_name: 'Lovelace', email, roles: 'full' },
  });

describe('events written by state changes outside operations (issue 22)', () => {
  it('install.deleted: deleting an install writes it once, in the deleting transaction; a refused or repeated delete writes none', async () => {
    const w = await readyWorld(t, f);
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    assert.equal((await partial.client.delete(`/v1/installs/${w.install.id}`)).status, 403);
    assert.deepEqual(await eventsOf(w, 'install.deleted'), []);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 404);
    await t.runJobs();
    const event = await onlyEvent(w, 'install.deleted', w.install.id);
    assert.equal(event.install_id, w.install.id, 'the event outlives its install');
    assert.deepEqual(event.resource, { type: 'install', id: w.install.id });
    assert.equal(event.data.name, w.install.name);
    assert.equal(event.data.install_id, w.install.id);
  });

  it('domain.verification_failed on a lookup without the value, domain.verified once on a match; a DNS failure or a second verify writes none', async () => {
    const w = await f.world();
    const domain = await addDomain(w.owner.client, w.install.id, uniqueDomain('ev'));
    const verify = () =>
      w.owner.client.post(`/v1/installs/${w.install.id}/domains/${domain.id}/verification`);
    // A failed lookup (SERVFAIL) is a 503 that changes nothing: no event.
    dns.answer(domain.txt_verification_key, { rcode: 'SERVFAIL' });
    assert.equal((await verify()).status, 503);
    assert.deepEqual(await eventsOf(w, 'domain.verification_failed'), []);
    dns.answer(domain.txt_verification_key, { txt: ['hostplane-verification=not-the-value'] });
    assert.equal((await verify()).status, 200);
    const failed = await onlyEvent(w, 'domain.verification_failed', domain.id);
    assert.deepEqual(failed.resource, { type: 'domain', id: domain.id });
    assert.equal(failed.install_id, w.install.id);
    assert.equal(failed.data.name, domain.name);
    assert.equal(failed.data.reason, 'value_mismatch');
    assert.equal(failed.data.record_name, domain.txt_verification_key);
    assert.deepEqual(await eventsOf(w, 'domain.verified'), []);
    dns.answer(domain.txt_verification_key, { txt: [domain.txt_verification_value] });
    const ok = await verify();
    assert.equal(ok.body.ownership_status, 'TXT_VERIFIED');
    assert.equal((await verify()).status, 200, 'verified already: answered without a lookup');
    const verified = await onlyEvent(w, 'domain.verified', domain.id);
    assert.equal(verified.data.name, domain.name);
    assert.equal(verified.data.verified_domain, domain.name);
    assert.equal((await eventsOf(w, 'domain.verification_failed')).length, 1);
  });

  it('domain.verification_failed names a missing record (no_txt_record)', async () => {
    const w = await f.world();
    const domain = await addDomain(w.owner.client, w.install.id, uniqueDomain('ev'));
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/domains/${domain.id}/verification`);
    assert.equal(res.status, 200);
    const event = await onlyEvent(w, 'domain.verification_failed', domain.id);
    assert.equal(event.data.reason, 'no_txt_record');
  });

  it('certificate.expiring: once when a certificate enters its 14-day window, not again when the job runs again; a replaced certificate gets none', async () => {
    const w = await f.world();
    const name = uniqueDomain('ev');
    await addDomain(w.owner.client, w.install.id, name);
    const pki = createPki(t.clock.now());
    const importCert = async (notAfter: Date) => {
      const leaf = pki.leaf({ names: [name], notAfter });
      const res = await w.owner.client.post(`/v1/installs/${w.install.id}/ssl_certificates/third_party`, {
        certificate: b64([leaf.certPem, pki.intermediate.certPem, pki.root.certPem].join('')),
        private_key: b64(leaf.keyPem),
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    // Replaced before its window: the first certificate's warning is dropped with it.
    await importCert(new Date(t.clock.now().getTime() + 20 * DAY));
    const cert = await importCert(new Date(t.clock.now().getTime() + 21 * DAY));
    await t.runJobs();
    t.clock.advance(6 * DAY);
    await t.runJobs();
    assert.deepEqual(await eventsOf(w, 'certificate.expiring'), [], 'the window starts 14 days before');
    t.clock.advance(DAY + HOUR);
    await t.runJobs();
    const event = await onlyEvent(w, 'certificate.expiring', cert.uuid);
    assert.deepEqual(event.resource, { type: 'ssl_certificate', id: cert.uuid });
    assert.equal(event.install_id, w.install.id);
    assert.equal(event.data.certificate_id, cert.uuid);
    assert.equal(event.data.expires_time, cert.expires_time);
    assert.equal(event.data.days_left, 13);
    assert.ok(!JSON.stringify(event).includes('PRIVATE KEY'));
    // The job again (what a retry after a crash does): nothing more is written.
    await withTransaction(t.database.db, (tx) =>
      t.queue.enqueue(tx, 'certificate-expiring', { certificate_id: cert.uuid }),
    );
    await t.runJobs();
    t.clock.advance(DAY);
    await t.runJobs();
    assert.equal((await eventsOf(w, 'certificate.expiring')).length, 1);
  });

  it('site_report.sent: once when a due report is stored and mailed; the job again writes none', async () => {
    const w = await f.world();
    const schedule = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: 'events-report@example.test' }],
      next_scheduled_date: new Date(t.clock.now().getTime() + HOUR).toISOString(),
    });
    await t.runJobs();
    assert.deepEqual(await eventsOf(w, 'site_report.sent'), [], 'not due yet');
    t.clock.advance(2 * HOUR);
    await t.runJobs();
    const [event] = await eventsOf(w, 'site_report.sent');
    assert.ok(event, 'site_report.sent written');
    assert.equal(event.install_id, null);
    assert.equal(event.resource.type, 'site_report');
    assert.equal(event.data.site_id, w.site.id);
    assert.equal(event.data.schedule_id, schedule.uuid);
    assert.equal(event.data.recipient_count, 1);
    assert.ok(!JSON.stringify(event).includes('events-report@example.test'));
    const reports = await reportsOf(w.owner.client, w.site.id);
    assert.deepEqual(
      reports.map((r: Json) => r.uuid),
      [event.resource.id],
    );
    assert.equal(event.data.report_id, event.resource.id);
    // The report job run again for the same schedule (a retry): the run is done, nothing more.
    await withTransaction(t.database.db, (tx) =>
      t.queue.enqueue(tx, 'site-report-generate', { schedule_id: schedule.uuid }),
    );
    await t.runJobs();
    await onlyEvent(w, 'site_report.sent', event.resource.id);
    await deleteSchedules(w.owner.client, w.site.id);
  });

  it('user.invited when an invitation is made, user.removed when a member is removed; a refused invite or removal writes none', async () => {
    const w = await f.world();
    const email = `ev-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.test`;
    const res = await invite(w, email);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const userId = res.body.account_user.user_id;
    assert.equal((await invite(w, email)).status, 400, 'already a member: refused');
    const invited = await onlyEvent(w, 'user.invited', userId);
    assert.deepEqual(invited.resource, { type: 'account_user', id: userId });
    assert.equal(invited.install_id, null);
    assert.equal(invited.data.email, email);
    assert.equal(invited.data.roles, 'full');
    assert.equal(invited.data.invited_by, w.owner.userId);
    assert.ok(!JSON.stringify(invited).includes('/accept'), 'no invitation link in the event');
    // The only owner cannot be removed: refused, no event.
    const lastOwner = await w.owner.client.delete(`${usersOf(w.account.id)}/${w.owner.userId}`);
    assert.equal(lastOwner.status, 400, JSON.stringify(lastOwner.body));
    assert.deepEqual(await eventsOf(w, 'user.removed'), []);
    assert.equal((await w.owner.client.delete(`${usersOf(w.account.id)}/${userId}`)).status, 204);
    assert.equal((await w.owner.client.delete(`${usersOf(w.account.id)}/${userId}`)).status, 404);
    const removed = await onlyEvent(w, 'user.removed', userId);
    assert.equal(removed.data.user_id, userId);
    assert.equal(removed.data.roles, 'full');
    assert.equal(removed.data.removed_by, w.owner.userId);
  });
});

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
