import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { rowCounts } from '../support/databases.js';
import { addDomain, uniqueDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import {
  basic,
  buildTestApp,
  type Client,
  clientFor,
  type Json,
  type Method,
  type Res,
} from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';
import { b64, createPki } from '../support/pki.js';

// Issue 22, dry runs (decisions.md #110): `?dry_run=true` on every route that takes it runs the
// real call's checks and answers 200 with what the call would do, changing nothing. For each route:
// (a) the answer's shape; (b) nothing changed: the rows of every table (jobs, mail outbox, events and
// audit rows included), the account's events and audit log, the outbox, and no job to run; (c) what
// makes the real call fail makes the dry run fail with the same status and error.
const t = await buildTestApp();
const f = factories(t);
const pki = createPki(t.clock.now());
const HOUR = 3600_000;

type World = Awaited<ReturnType<typeof readyWorld>>;

/** Everything a dry run must leave as it was. */
async function trace(w: World) {
  const events = await w.owner.client.get(`/v1/accounts/${w.account.id}/events?limit=100`);
  assert.equal(events.status, 200, JSON.stringify(events.body));
  const audit = await w.owner.client.get(`/v1/accounts/${w.account.id}/audit_events?limit=1`);
  assert.equal(audit.status, 200, JSON.stringify(audit.body));
  const mail = await t.admin.get('/admin/v1/mail?limit=1');
  assert.equal(mail.status, 200, JSON.stringify(mail.body));
  return {
    tables: await rowCounts(t.database.db),
    events: events.body.results.map((e: Json) => e.id),
    audit: audit.body.count,
    mail: mail.body.count,
  };
}

/** (b): the trace is what it was and no job is waiting to run. */
async function assertUnchanged(w: World, before: Awaited<ReturnType<typeof trace>>) {
  assert.deepEqual(await trace(w), before);
  assert.equal(await t.runJobs(), 0, 'a dry run queued a job');
  assert.deepEqual(await trace(w), before);
}

/** (a) + (b): the dry run answers 200 (checked by `expect`) and changes nothing. */
async function dryRun(w: World, client: Client, method: Method, url: string, body?: unknown) {
  await t.runJobs();
  const before = await trace(w);
  const res = await client.request(method, `${url}?dry_run=true`, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.dry_run, true);
  await assertUnchanged(w, before);
  return res.body;
}

const refusal = (res: Res) => ({
  status: res.status,
  message: res.body?.message,
  errors: (res.body?.errors ?? []).map((e: Json) => `${e.field}:${e.code}`),
});

/**
 * (c): the dry run is refused as the real call is (same status, message and field errors), changing
 * nothing; then the real call, which must be refused the same way.
 */
async function sameRefusal(
  w: World,
  client: Client,
  method: Method,
  url: string,
  body: unknown,
  expected: { status: number; code?: string },
) {
  const before = await trace(w);
  const dry = await client.request(method, `${url}?dry_run=true`, body);
  assert.equal(dry.status, expected.status, JSON.stringify(dry.body));
  if (expected.code) assert.ok(refusal(dry).errors.some((e: string) => e.endsWith(`:${expected.code}`)));
  assert.deepEqual(await trace(w), before);
  const real = await client.request(method, url, body);
  assert.deepEqual(refusal(dry), refusal(real));
}

/** A `read`-scoped credential of the world's owner: it may look, not act (403). */
async function readOnly(w: World): Promise<Client> {
  const made = await w.owner.client.post(`/v1/accounts/${w.account.id}/credentials`, { scope: 'read' });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  return clientFor(t.app, basic(made.body.username, made.body.password));
}

describe('copyInstall ?dry_run=true (issue 22)', () => {
  const url = '/v1/install_copy';

  it('issue 22 DR1 C3 C5 answers the copy_install it would start and the tables it would copy; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const staging = await readyInstall(t, f, w, 'staging');
    const body = await dryRun(w, w.owner.client, 'POST', url, {
      source_environment_id: w.install.id,
      destination_environment_id: staging.id,
      notification_emails: ['ops@example.test'],
      custom_options: { include_files: false, db_tables: ['wp_posts', 'wp_options'] },
    });
    assert.deepEqual(
      { ...body, expected_seconds: typeof body.expected_seconds },
      {
        dry_run: true,
        operation: 'copy_install',
        source_install_id: w.install.id,
        destination_install_id: staging.id,
        include_files: false,
        include_db: true,
        db_tables: ['wp_posts', 'wp_options'],
        notification_emails: ['ops@example.test'],
        expected_seconds: 'number',
      },
    );
    const whole = await dryRun(w, w.owner.client, 'POST', url, {
      source_environment_id: w.install.id,
      destination_environment_id: staging.id,
    });
    assert.equal(whole.db_tables, null, 'C3: without db_tables, the whole database');
    assert.equal(whole.include_files, true);
  });

  it('issue 22 DR2 C4 G12 G4 is refused as the copy is: 400 db_tables without the database, 400 busy, 404 foreign, 403 read scope', async () => {
    const w = await readyWorld(t, f);
    const staging = await readyInstall(t, f, w, 'staging');
    const stranger = await readyWorld(t, f);
    const pair = { source_environment_id: w.install.id, destination_environment_id: staging.id };
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      url,
      { ...pair, custom_options: { include_db: false, db_tables: ['wp_posts'] } },
      { status: 400 },
    );
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      url,
      { ...pair, destination_environment_id: stranger.install.id },
      { status: 404 },
    );
    await sameRefusal(w, await readOnly(w), 'POST', url, pair, { status: 403 });
    // G12: a backup of the destination is running: checked in the transaction, with the install locked.
    const backup = await w.owner.client.post(`/v1/installs/${staging.id}/backups`, {
      description: 'running',
      notification_emails: [],
    });
    assert.equal(backup.status, 202, JSON.stringify(backup.body));
    const before = await trace(w);
    const dry = await w.owner.client.post(`${url}?dry_run=true`, pair);
    assert.equal(dry.status, 400, JSON.stringify(dry.body));
    assert.deepEqual(refusal(dry).errors, ['destination_environment_id:install_busy']);
    assert.deepEqual(await trace(w), before);
    assert.deepEqual(refusal(await w.owner.client.post(url, pair)), refusal(dry));
    await t.runJobs();
  });
});

describe('restoreBackup ?dry_run=true (issue 22)', () => {
  const restoreUrl = (installId: string, backupId: string) =>
    `/v1/installs/${installId}/backups/${backupId}/restore`;

  async function backedUp() {
    const w = await readyWorld(t, f);
    const made = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'before',
      notification_emails: [],
    });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    await t.runJobs();
    return { w, backup: made.body };
  }

  it('issue 22 DR1 R1 R2 answers the restore_backup it would start, with its checkpoint; nothing changed', async () => {
    const { w, backup } = await backedUp();
    const body = await dryRun(w, w.owner.client, 'POST', restoreUrl(w.install.id, backup.id), {
      notification_emails: ['ops@example.test'],
      restore_database: false,
    });
    assert.deepEqual(
      { ...body, expected_seconds: typeof body.expected_seconds },
      {
        dry_run: true,
        operation: 'restore_backup',
        install_id: w.install.id,
        backup_id: backup.id,
        restore_database: false,
        create_checkpoint: true,
        notification_emails: ['ops@example.test'],
        expected_seconds: 'number',
      },
    );
  });

  it('issue 22 DR2 R1 G12 is refused as the restore is: 400 backup not completed, 400 busy, 404 unknown backup, 403 read scope', async () => {
    const { w, backup } = await backedUp();
    const body = { notification_emails: [] };
    await sameRefusal(w, w.owner.client, 'POST', restoreUrl(w.install.id, randomUUID()), body, {
      status: 404,
    });
    await sameRefusal(w, await readOnly(w), 'POST', restoreUrl(w.install.id, backup.id), body, {
      status: 403,
    });
    const running = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'running',
      notification_emails: [],
    });
    assert.equal(running.status, 202);
    // The running backup is not completed (R1), and it keeps the install busy for a restore (G12).
    await sameRefusal(w, w.owner.client, 'POST', restoreUrl(w.install.id, running.body.id), body, {
      status: 400,
      code: 'backup_not_completed',
    });
    const before = await trace(w);
    const dry = await w.owner.client.post(`${restoreUrl(w.install.id, backup.id)}?dry_run=true`, body);
    assert.deepEqual(refusal(dry).errors, ['install_id:install_busy']);
    assert.deepEqual(await trace(w), before);
    assert.deepEqual(
      refusal(await w.owner.client.post(restoreUrl(w.install.id, backup.id), body)),
      refusal(dry),
    );
    await t.runJobs();
  });
});

describe('createSiteTransfer ?dry_run=true (issue 22)', () => {
  const url = (siteId: string) => `/v1/sites/${siteId}/site_transfers`;

  /** A provisioned origin and a destination account, the origin's owner owning both (T2). */
  async function scene() {
    const w = await readyWorld(t, f);
    const dest = await f.account();
    const put = await t.admin.put(`/admin/v1/users/${w.owner.userId}/memberships/${dest.id}`, {
      roles: 'owner',
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    return { w, dest };
  }

  it('issue 22 DR1 T2 T6 answers the transfer_site it would start, now or scheduled, with the installs that would move; nothing changed', async () => {
    const { w, dest } = await scene();
    const now = await dryRun(w, w.owner.client, 'POST', url(w.site.id), {
      destination_account_id: dest.id,
    });
    assert.deepEqual(now, {
      dry_run: true,
      operation: 'transfer_site',
      site_id: w.site.id,
      origin_account_id: w.account.id,
      destination_account_id: dest.id,
      status: 'pending',
      scheduled_time: null,
      maintenance_mode: false,
      install_names: [w.install.name],
    });
    const at = new Date(t.clock.now().getTime() + 2 * HOUR).toISOString();
    const later = await dryRun(w, w.owner.client, 'POST', url(w.site.id), {
      destination_account_id: dest.id,
      scheduled_time: at,
      maintenance_mode: true,
    });
    assert.equal(later.status, 'scheduled');
    assert.equal(later.scheduled_time, at);
    assert.equal(later.maintenance_mode, true);
  });

  it('issue 22 DR2 T7 T8 A3 is refused as the transfer is: 409 active transfer, 422 same account and too soon, 403 without transfers:manage', async () => {
    const { w, dest } = await scene();
    const site = url(w.site.id);
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      site,
      { destination_account_id: w.account.id },
      { status: 422, code: 'same_account' },
    );
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      site,
      {
        destination_account_id: dest.id,
        scheduled_time: new Date(t.clock.now().getTime() + HOUR / 2).toISOString(),
      },
      { status: 422, code: 'scheduled_time_too_soon' },
    );
    const full = await f.user([
      { account_id: w.account.id, roles: 'full' },
      { account_id: dest.id, roles: 'owner' },
    ]);
    await sameRefusal(w, full.client, 'POST', site, { destination_account_id: dest.id }, { status: 403 });
    // T7: checked in the transaction, with the site locked.
    const scheduled = new Date(t.clock.now().getTime() + 3 * HOUR).toISOString();
    const first = await w.owner.client.post(site, {
      destination_account_id: dest.id,
      scheduled_time: scheduled,
    });
    assert.equal(first.status, 202, JSON.stringify(first.body));
    await sameRefusal(w, w.owner.client, 'POST', site, { destination_account_id: dest.id }, { status: 409 });
  });
});

describe('updateDomain ?dry_run=true (issue 22)', () => {
  const url = (installId: string, domainId: string) => `/v1/installs/${installId}/domains/${domainId}`;

  it('issue 22 DR1 D4 answers the primary-domain change and the routing it would apply; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const first = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    const second = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const body = await dryRun(w, w.owner.client, 'PATCH', url(w.install.id, second.id), { primary: true });
    assert.deepEqual(body, {
      dry_run: true,
      install_id: w.install.id,
      domain_id: second.id,
      name: second.name,
      primary: { before: false, after: true },
      redirect_to: { before: null, after: null },
      secure_all_urls: { before: false, after: false },
      primary_domain: { before: first.name, after: second.name },
      operation: 'apply_routing',
    });
    const off = await dryRun(w, w.owner.client, 'PATCH', url(w.install.id, first.id), { primary: false });
    assert.deepEqual(off.primary_domain, { before: first.name, after: w.install.cname });
    const same = await dryRun(w, w.owner.client, 'PATCH', url(w.install.id, second.id), {
      secure_all_urls: true,
    });
    assert.deepEqual(same.secure_all_urls, { before: false, after: true });
    // secure_all_urls is in the install's server blocks (issue 21): it re-applies the routing too.
    assert.equal(same.operation, 'apply_routing');
    const unchanged = await dryRun(w, w.owner.client, 'PATCH', url(w.install.id, second.id), {
      secure_all_urls: false,
      primary: false,
    });
    assert.equal(unchanged.operation, null, 'nothing to route');
    const domain = await w.owner.client.get(url(w.install.id, second.id));
    assert.equal(domain.body.primary, false);
    assert.equal(domain.body.secure_all_urls, false);
  });

  it('issue 22 DR2 D3 D5 is refused as the change is: 400 wildcard or redirected primary, 404 unknown domain, 403 read scope', async () => {
    const w = await readyWorld(t, f);
    const target = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const wildcard = await addDomain(w.owner.client, w.install.id, `*.${uniqueDomain()}`);
    const redirected = await addDomain(w.owner.client, w.install.id, uniqueDomain(), {
      redirect_to: target.id,
    });
    const primary = { primary: true };
    await sameRefusal(w, w.owner.client, 'PATCH', url(w.install.id, wildcard.id), primary, {
      status: 400,
      code: 'wildcard_cannot_be_primary',
    });
    await sameRefusal(w, w.owner.client, 'PATCH', url(w.install.id, redirected.id), primary, {
      status: 400,
      code: 'redirected_cannot_be_primary',
    });
    await sameRefusal(
      w,
      w.owner.client,
      'PATCH',
      url(w.install.id, target.id),
      { redirect_to: target.id },
      {
        status: 400,
        code: 'redirect_loop',
      },
    );
    await sameRefusal(w, w.owner.client, 'PATCH', url(w.install.id, randomUUID()), primary, { status: 404 });
    await sameRefusal(w, await readOnly(w), 'PATCH', url(w.install.id, target.id), primary, { status: 403 });
  });
});

describe('importThirdPartySSLCertificate ?dry_run=true (issue 22)', () => {
  const url = (installId: string) => `/v1/installs/${installId}/ssl_certificates/third_party`;

  async function setup() {
    const w = await readyWorld(t, f);
    const name = uniqueDomain('c');
    await addDomain(w.owner.client, w.install.id, name);
    const leaf = pki.leaf({ names: [name] });
    const chain = [leaf, pki.intermediate, pki.root].map((c) => c.certPem).join('');
    return { w, name, leaf, good: { certificate: b64(chain), private_key: b64(leaf.keyPem) } };
  }

  it('issue 22 DR1 L1 L2 answers the certificate it would store (never its key), what it replaces and the routing; nothing changed', async () => {
    const { w, name, good } = await setup();
    const body = await dryRun(w, w.owner.client, 'POST', url(w.install.id), good);
    assert.deepEqual(Object.keys(body).sort(), [
      'domains',
      'dry_run',
      'fingerprint',
      'install_id',
      'issuer',
      'not_after',
      'not_before',
      'operation',
      'replaces',
      'serial',
      'subject',
    ]);
    assert.deepEqual(body.domains, [name]);
    assert.deepEqual(body.replaces, []);
    assert.equal(body.operation, 'apply_routing');
    assert.doesNotMatch(JSON.stringify(body), /PRIVATE KEY/);
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/ssl_certificates`);
    assert.deepEqual(list.body.certificates, []);
    // A stored certificate of the same name would be replaced.
    const stored = await w.owner.client.post(url(w.install.id), good);
    assert.equal(stored.status, 200, JSON.stringify(stored.body));
    const again = await dryRun(w, w.owner.client, 'POST', url(w.install.id), good);
    assert.deepEqual(again.replaces, [stored.body.uuid]);
  });

  it('issue 22 DR2 L1 is refused as the import is: 400 key of another certificate, 404 foreign install, 403 read scope', async () => {
    const { w, name, good } = await setup();
    const other = pki.leaf({ names: [name] });
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      url(w.install.id),
      { ...good, private_key: b64(other.keyPem) },
      { status: 400 },
    );
    const stranger = await readyWorld(t, f);
    await sameRefusal(w, w.owner.client, 'POST', url(stranger.install.id), good, { status: 404 });
    await sameRefusal(w, await readOnly(w), 'POST', url(w.install.id), good, { status: 403 });
  });
});

describe('account users ?dry_run=true (issue 22)', () => {
  const users = (accountId: string) => `/v1/accounts/${accountId}/account_users`;
  const invitee = (accountId: string, extra: Record<string, unknown> = {}) => ({
    user: {
      account_id: accountId,
      first_name: 'Ana',
      last_name: 'Diaz',
      email: `${randomUUID().slice(0, 8)}@example.test`,
      roles: 'full',
      ...extra,
    },
  });

  it('issue 22 DR1 U1 U3 createAccountUser answers the membership, the user it would make and who would be mailed; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const input = invitee(w.account.id, { roles: 'partial', install_ids: [w.install.id] });
    const body = await dryRun(w, w.owner.client, 'POST', users(w.account.id), input);
    assert.deepEqual(body, {
      dry_run: true,
      account_id: w.account.id,
      email: input.user.email,
      roles: 'partial',
      install_ids: [w.install.id],
      new_user: true,
      invitation_mailed_to: input.user.email,
    });
    const elsewhere = await readyWorld(t, f);
    const known = await dryRun(
      w,
      w.owner.client,
      'POST',
      users(w.account.id),
      invitee(w.account.id, { email: elsewhere.owner.email }),
    );
    assert.equal(known.new_user, false, 'a user of another account would join');
    const list = await w.owner.client.get(users(w.account.id));
    assert.equal(list.body.count, 1);
  });

  it('issue 22 DR2 U2 U3 createAccountUser is refused as the invitation is: 400 already a member, 400 install_ids on a full role, 403 escalation', async () => {
    const w = await readyWorld(t, f);
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      users(w.account.id),
      invitee(w.account.id, { email: w.owner.email }),
      { status: 400, code: 'already_member' },
    );
    await sameRefusal(
      w,
      w.owner.client,
      'POST',
      users(w.account.id),
      invitee(w.account.id, { install_ids: [w.install.id] }),
      { status: 400, code: 'not_partial' },
    );
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    await sameRefusal(
      w,
      full.client,
      'POST',
      users(w.account.id),
      invitee(w.account.id, { roles: 'owner' }),
      {
        status: 403,
      },
    );
  });

  it('issue 22 DR1 U2 updateAccountUser answers the roles and installs before and after; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const memberUrl = `${users(w.account.id)}/${member.userId}`;
    const body = await dryRun(w, w.owner.client, 'PATCH', memberUrl, {
      roles: 'partial',
      install_ids: [w.install.id],
    });
    assert.deepEqual(body, {
      dry_run: true,
      account_id: w.account.id,
      user_id: member.userId,
      roles: { before: 'full', after: 'partial' },
      install_ids: { before: [], after: [w.install.id] },
    });
    assert.equal((await w.owner.client.get(memberUrl)).body.roles, 'full');
  });

  it('issue 22 DR2 U2 updateAccountUser is refused as the change is: 400 last owner, 403 escalation, 404 not a member', async () => {
    const w = await readyWorld(t, f);
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const base = users(w.account.id);
    await sameRefusal(
      w,
      w.owner.client,
      'PATCH',
      `${base}/${w.owner.userId}`,
      { roles: 'full' },
      {
        status: 400,
        code: 'last_owner',
      },
    );
    await sameRefusal(w, full.client, 'PATCH', `${base}/${full.userId}`, { roles: 'owner' }, { status: 403 });
    await sameRefusal(
      w,
      w.owner.client,
      'PATCH',
      `${base}/${randomUUID()}`,
      { roles: 'full' },
      { status: 404 },
    );
  });

  it('issue 22 DR1 deleteAccountUser answers the membership that would end; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const member = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const memberUrl = `${users(w.account.id)}/${member.userId}`;
    const body = await dryRun(w, w.owner.client, 'DELETE', memberUrl);
    assert.deepEqual(body, {
      dry_run: true,
      account_id: w.account.id,
      user_id: member.userId,
      roles: 'partial',
      install_ids: [w.install.id],
    });
    assert.equal((await member.client.get(`/v1/installs/${w.install.id}`)).status, 200, 'still a member');
  });

  it('issue 22 DR2 deleteAccountUser is refused as the removal is: 400 last owner, 403 a higher role, 404 not a member', async () => {
    const w = await readyWorld(t, f);
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const base = users(w.account.id);
    await sameRefusal(w, w.owner.client, 'DELETE', `${base}/${w.owner.userId}`, undefined, {
      status: 400,
      code: 'last_owner',
    });
    await sameRefusal(w, full.client, 'DELETE', `${base}/${w.owner.userId}`, undefined, { status: 403 });
    await sameRefusal(w, w.owner.client, 'DELETE', `${base}/${randomUUID()}`, undefined, { status: 404 });
  });
});

describe('deleteInstall ?dry_run=true (issue 22)', () => {
  it('issue 22 DR1 answers the deprovisioning and the names that would stop serving; nothing changed', async () => {
    const w = await readyWorld(t, f);
    const name = uniqueDomain();
    await addDomain(w.owner.client, w.install.id, name);
    const body = await dryRun(w, w.owner.client, 'DELETE', `/v1/installs/${w.install.id}`);
    assert.equal(body.operation, 'deprovision_install');
    assert.deepEqual(body.domains_that_would_stop_serving.sort(), [name, w.install.cname].sort());
  });

  it('issue 22 DR1 a dry run with an Idempotency-Key keeps no key: the same key then runs the real call', async () => {
    const w = await readyWorld(t, f);
    const url = `/v1/installs/${w.install.id}`;
    const key = { 'Idempotency-Key': `dry-${randomUUID()}` };
    const before = await trace(w);
    const dry = await w.owner.client.request('DELETE', `${url}?dry_run=true`, undefined, key);
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    await assertUnchanged(w, before);
    const real = await w.owner.client.request('DELETE', url, undefined, key);
    assert.equal(real.status, 204, JSON.stringify(real.body));
    assert.equal(real.headers['idempotent-replayed'], undefined);
    const replay = await w.owner.client.request('DELETE', url, undefined, key);
    assert.equal(replay.status, 204);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
  });

  it('issue 22 DR2 is refused as the deletion is: 403 partial member, 404 foreign; dry_run must be a boolean (400)', async () => {
    const w = await readyWorld(t, f);
    const stranger = await readyWorld(t, f);
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const url = `/v1/installs/${w.install.id}`;
    await sameRefusal(w, partial.client, 'DELETE', url, undefined, { status: 403 });
    await sameRefusal(w, stranger.owner.client, 'DELETE', url, undefined, { status: 404 });
    const before = await trace(w);
    assert.equal((await w.owner.client.delete(`${url}?dry_run=maybe`)).status, 400);
    assert.deepEqual(await trace(w), before);
  });
});
