import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, type Client, clientFor, type Json, startApp } from '../support/harness.js';

// Issue 22: scoped, expiring credentials (auth/credentials.ts, modules/credentials/). The generated
// route x credential cases live in the shared authorization suite (security.test.ts); this file covers
// the lifecycle: creation and its checks, the secret shown once, expiry, IP allow-list, revocation in
// every process, last use, and the intersection with the maker's current membership.
const t = await buildTestApp();
// A second API process on the same database: a revocation must reach it through the database.
const other = await startApp(t.database);
after(() => other.close());
const f = factories(t);

interface Made {
  body: Json;
  client: Client;
  authorization: string;
}

async function makeCredential(
  owner: Client,
  accountId: string,
  body: Record<string, unknown>,
): Promise<Made> {
  const res = await owner.post(`/v1/accounts/${accountId}/credentials`, body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const authorization = basic(res.body.username, res.body.password);
  return { body: res.body, authorization, client: clientFor(t.app, authorization) };
}

/** An account with an owner, two sites with an install each. */
async function scene() {
  const w = await f.world();
  const site2 = await f.site(w.owner.client, w.account.id);
  const install2 = await f.install(w.owner.client, w.account.id, site2.id);
  await t.runJobs();
  return { ...w, site2, install2 };
}

describe('issue 22 scoped credentials: creation', () => {
  it('S1 an owner makes a credential: hpk_ username, the password once, never in a read', async () => {
    const w = await scene();
    const made = await makeCredential(w.owner.client, w.account.id, {
      description: 'CI',
      scope: 'read',
      expires_at: new Date(t.clock.now().getTime() + 86_400_000).toISOString(),
      allowed_cidrs: ['127.0.0.0/8', '::1'],
    });
    assert.match(made.body.username, /^hpk_[0-9a-f]{32}$/);
    assert.equal(made.body.username, `hpk_${made.body.id.replaceAll('-', '')}`);
    assert.ok(made.body.password.length >= 40);
    assert.equal(made.body.scope, 'read');
    assert.equal(made.body.user_id, w.owner.userId);
    assert.deepEqual(made.body.allowed_cidrs, ['127.0.0.0/8', '::1']);
    const got = await w.owner.client.get(`/v1/accounts/${w.account.id}/credentials/${made.body.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.password, undefined);
    assert.equal(JSON.stringify(got.body).includes(made.body.password), false);
    const list = await w.owner.client.get(`/v1/accounts/${w.account.id}/credentials`);
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.results.map((c: Json) => c.id),
      [made.body.id],
    );
    assert.equal(JSON.stringify(list.body).includes(made.body.password), false);
    // It works as HTTP Basic.
    assert.equal((await made.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
  });

  it('S1 bad input is a 400: scope, CIDR, a past expiry, an install of another account', async () => {
    const w = await scene();
    const foreign = await f.world();
    const url = `/v1/accounts/${w.account.id}/credentials`;
    const cases: [Record<string, unknown>, string][] = [
      [{ scope: 'root' }, 'scope'],
      [{ scope: 'read', allowed_cidrs: ['10.0.0.0/33'] }, 'allowed_cidrs'],
      [{ scope: 'read', allowed_cidrs: ['not-an-ip'] }, 'allowed_cidrs'],
      [{ scope: 'read', expires_at: new Date(t.clock.now().getTime() - 1000).toISOString() }, 'expires_at'],
      [{ scope: 'read', install_ids: [foreign.install.id] }, 'install_ids'],
      [{ scope: 'read', install_ids: [] }, 'install_ids'],
    ];
    for (const [body, field] of cases) {
      const res = await w.owner.client.post(url, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      assert.ok(JSON.stringify(res.body).includes(field), JSON.stringify(res.body));
    }
    assert.equal((await w.owner.client.get(url)).body.count, 0);
  });

  it('S1 only owners manage credentials; a scoped credential, even admin, cannot make another', async () => {
    const w = await scene();
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const url = `/v1/accounts/${w.account.id}/credentials`;
    assert.equal((await full.client.post(url, { scope: 'read' })).status, 403);
    assert.equal((await full.client.get(url)).status, 403);
    const admin = await makeCredential(w.owner.client, w.account.id, { scope: 'admin' });
    assert.equal((await admin.client.post(url, { scope: 'read' })).status, 403);
    assert.equal((await admin.client.get(url)).status, 403);
    // Nor the maker's own SSH keys (not an account resource).
    const key = await admin.client.post('/v1/ssh_keys', { public_key: 'ssh-ed25519 AAAA' });
    assert.equal(key.status, 403, JSON.stringify(key.body));
    // And a foreign account is a 404.
    const foreign = await f.world();
    assert.equal(
      (await w.owner.client.post(`/v1/accounts/${foreign.account.id}/credentials`, { scope: 'read' })).status,
      404,
    );
  });
});

describe('issue 22 scoped credentials: what they may do', () => {
  it('S2 read reads everything the owner reads and writes nothing (403)', async () => {
    const w = await scene();
    const read = await makeCredential(w.owner.client, w.account.id, { scope: 'read' });
    assert.equal((await read.client.get(`/v1/installs/${w.install.id}`)).status, 200);
    assert.equal((await read.client.get(`/v1/installs?account_id=${w.account.id}`)).body.count, 2);
    assert.equal((await read.client.post('/v1/sites', { name: 'X', account_id: w.account.id })).status, 403);
    assert.equal(
      (await read.client.patch(`/v1/installs/${w.install.id}`, { primary_domain: null })).status,
      403,
    );
    assert.equal(
      (
        await read.client.post(`/v1/installs/${w.install.id}/backups`, {
          description: 'x',
          notification_emails: ['a@example.test'],
        })
      ).status,
      403,
    );
    assert.equal((await read.client.delete(`/v1/installs/${w.install.id}`)).status, 403);
  });

  it('S2 operate backs up but does not delete or create; install-scoped sees only its installs', async () => {
    const w = await scene();
    const op = await makeCredential(w.owner.client, w.account.id, {
      scope: 'operate',
      install_ids: [w.install.id],
    });
    const backup = await op.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'ci',
      notification_emails: ['ci@example.test'],
    });
    assert.equal(backup.status, 202, JSON.stringify(backup.body));
    assert.equal(
      (
        await op.client.post(`/v1/installs/${w.install2.id}/backups`, {
          description: 'ci',
          notification_emails: ['ci@example.test'],
        })
      ).status,
      404,
    );
    assert.equal((await op.client.get(`/v1/installs/${w.install2.id}`)).status, 404);
    assert.equal((await op.client.get(`/v1/sites/${w.site2.id}`)).status, 404);
    const list = await op.client.get(`/v1/installs?account_id=${w.account.id}`);
    assert.deepEqual(
      list.body.results.map((i: Json) => i.id),
      [w.install.id],
    );
    assert.equal((await op.client.delete(`/v1/installs/${w.install.id}`)).status, 403);
    // An install-scoped admin credential still cannot touch the account's sites.
    const admin = await makeCredential(w.owner.client, w.account.id, {
      scope: 'admin',
      install_ids: [w.install.id],
    });
    assert.equal((await admin.client.post('/v1/sites', { name: 'X', account_id: w.account.id })).status, 403);
    // Only the credential's account exists for it.
    const foreign = await f.world();
    await t.admin.put(`/admin/v1/users/${w.owner.userId}/memberships/${foreign.account.id}`, {
      roles: 'owner',
    });
    assert.equal((await w.owner.client.get(`/v1/accounts/${foreign.account.id}`)).status, 200);
    assert.equal((await op.client.get(`/v1/accounts/${foreign.account.id}`)).status, 404);
  });

  it("S3 never wider than its maker: the maker's role change or removal narrows it at once", async () => {
    const w = await scene();
    const maker = await f.user([{ account_id: w.account.id, roles: 'owner' }]);
    const admin = await makeCredential(maker.client, w.account.id, { scope: 'admin' });
    assert.equal((await admin.client.get(`/v1/installs/${w.install2.id}`)).status, 200);
    const demoted = await t.admin.put(`/admin/v1/users/${maker.userId}/memberships/${w.account.id}`, {
      roles: 'partial',
      install_ids: [w.install.id],
    });
    assert.equal(demoted.status, 200, JSON.stringify(demoted.body));
    assert.equal((await admin.client.get(`/v1/installs/${w.install.id}`)).status, 200);
    assert.equal((await admin.client.get(`/v1/installs/${w.install2.id}`)).status, 404);
    assert.equal((await admin.client.post('/v1/sites', { name: 'X', account_id: w.account.id })).status, 403);
    // In the other process too (it re-reads the membership epoch within a second).
    other.clock.advance(1100);
    const elsewhere = clientFor(other.app, admin.authorization);
    assert.equal((await elsewhere.get(`/v1/installs/${w.install2.id}`)).status, 404);
    const removed = await t.admin.delete(`/admin/v1/users/${maker.userId}/memberships/${w.account.id}`);
    assert.equal(removed.status, 204);
    assert.equal((await admin.client.get(`/v1/accounts/${w.account.id}`)).status, 404);
  });
});

describe('issue 22 scoped credentials: refused with 401', () => {
  it('S4 an expired credential is 401 (cached or not)', async () => {
    const w = await scene();
    const made = await makeCredential(w.owner.client, w.account.id, {
      scope: 'read',
      expires_at: new Date(t.clock.now().getTime() + 60_000).toISOString(),
    });
    assert.equal((await made.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
    t.clock.advance(61_000);
    const res = await made.client.get(`/v1/accounts/${w.account.id}`);
    assert.equal(res.status, 401);
    assert.equal(res.body.message, 'Bad Credentials');
  });

  it('S4 a request from outside the IP allow-list is 401; from inside, 200', async () => {
    const w = await scene();
    const outside = await makeCredential(w.owner.client, w.account.id, {
      scope: 'read',
      allowed_cidrs: ['203.0.113.0/24'],
    });
    assert.equal((await outside.client.get(`/v1/accounts/${w.account.id}`)).status, 401);
    const inside = await makeCredential(w.owner.client, w.account.id, {
      scope: 'read',
      allowed_cidrs: ['127.0.0.1/32'],
    });
    assert.equal((await inside.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
  });

  it('S4 a revoked credential is 401 on the next request here and in another process', async () => {
    const w = await scene();
    const made = await makeCredential(w.owner.client, w.account.id, { scope: 'read' });
    const elsewhere = clientFor(other.app, made.authorization);
    assert.equal((await made.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
    assert.equal((await elsewhere.get(`/v1/accounts/${w.account.id}`)).status, 200);
    const revoked = await w.owner.client.delete(`/v1/accounts/${w.account.id}/credentials/${made.body.id}`);
    assert.equal(revoked.status, 204);
    assert.equal((await made.client.get(`/v1/accounts/${w.account.id}`)).status, 401);
    other.clock.advance(1100);
    assert.equal((await elsewhere.get(`/v1/accounts/${w.account.id}`)).status, 401);
    const got = await w.owner.client.get(`/v1/accounts/${w.account.id}/credentials/${made.body.id}`);
    assert.ok(got.body.revoked_at);
    // Revoking again is harmless; an unknown id is a 404.
    assert.equal(
      (await w.owner.client.delete(`/v1/accounts/${w.account.id}/credentials/${made.body.id}`)).status,
      204,
    );
    assert.equal(
      (await w.owner.client.delete(`/v1/accounts/${w.account.id}/credentials/${w.install.id}`)).status,
      404,
    );
  });

  it('S4 a wrong secret for a real hpk_ username, or an unknown one, is 401', async () => {
    const w = await scene();
    const made = await makeCredential(w.owner.client, w.account.id, { scope: 'read' });
    const wrong = clientFor(t.app, basic(made.body.username, `${made.body.password.slice(0, -1)}x`));
    assert.equal((await wrong.get(`/v1/accounts/${w.account.id}`)).status, 401);
    const unknown = clientFor(t.app, basic(`hpk_${'0'.repeat(32)}`, made.body.password));
    assert.equal((await unknown.get(`/v1/accounts/${w.account.id}`)).status, 401);
  });
});

describe('issue 22 scoped credentials: last use', () => {
  it('S5 last_used_at and last_used_ip are kept (write-behind)', async () => {
    const w = await scene();
    const made = await makeCredential(w.owner.client, w.account.id, { scope: 'read' });
    assert.equal(made.body.last_used_at, null);
    assert.equal((await made.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
    const got = await w.owner.client.get(`/v1/accounts/${w.account.id}/credentials/${made.body.id}`);
    assert.equal(got.body.last_used_at, t.clock.now().toISOString());
    assert.equal(got.body.last_used_ip, '127.0.0.1');
  });
});

describe('issue 28 finding 6: no owner is made or unmade through a scoped credential (decision 108)', () => {
  const usersOf = (accountId: string) => `/v1/accounts/${accountId}/account_users`;
  const invitation = (accountId: string, roles: string) => ({
    user: {
      account_id: accountId,
      first_name: 'Mallory',
      last_name: 'Owner',
      email: `m${Math.random().toString(16).slice(2, 12)}@example.test`,
      roles,
    },
  });
  /** A 403 whose message says a scoped credential cannot make or unmake an owner. */
  const refusedAsOwnerChange = (res: { status: number; body: Json }, what: string) => {
    assert.equal(res.status, 403, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
    assert.match(res.body.message, /scoped credential cannot make or unmake an owner/, what);
  };

  it('issue 28 finding 6: an admin credential is refused (403, saying why) on inviting an owner, promoting to owner, demoting or removing an owner, and on each dry run; nothing changes', async () => {
    const w = await scene();
    const second = await f.user([{ account_id: w.account.id, roles: 'owner' }]);
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    // Known from another account: joining as owner is refused the same way.
    const outsider = await f.user([{ account_id: (await f.account()).id, roles: 'owner' }]);
    const admin = await makeCredential(w.owner.client, w.account.id, { scope: 'admin' });
    const users = usersOf(w.account.id);
    const one = (userId: string) => `${users}/${userId}`;
    const known = invitation(w.account.id, 'owner');
    known.user.email = outsider.email;
    for (const dry of ['', '?dry_run=true']) {
      const tag = dry ? ' (dry run)' : '';
      refusedAsOwnerChange(
        await admin.client.post(`${users}${dry}`, invitation(w.account.id, 'owner')),
        `invite owner${tag}`,
      );
      refusedAsOwnerChange(
        await admin.client.post(`${users}${dry}`, known),
        `add a known user as owner${tag}`,
      );
      refusedAsOwnerChange(
        await admin.client.patch(`${one(member.userId)}${dry}`, { roles: 'owner' }),
        `promote${tag}`,
      );
      refusedAsOwnerChange(
        await admin.client.patch(`${one(second.userId)}${dry}`, { roles: 'full' }),
        `demote${tag}`,
      );
      refusedAsOwnerChange(
        await admin.client.delete(`${one(second.userId)}${dry}`),
        `remove another owner${tag}`,
      );
      refusedAsOwnerChange(
        await admin.client.delete(`${one(w.owner.userId)}${dry}`),
        `remove its maker${tag}`,
      );
    }
    const roles = async () =>
      Object.fromEntries(
        (await w.owner.client.get(`${users}?limit=100`)).body.results.map((u: Json) => [u.email, u.roles]),
      );
    assert.deepEqual(await roles(), {
      [w.owner.email]: 'owner',
      [second.email]: 'owner',
      [member.email]: 'full',
    });
    // What is not about owners still works through the credential (decision 108: admin manages users).
    const invited = await admin.client.post(users, invitation(w.account.id, 'full'));
    assert.equal(invited.status, 201, JSON.stringify(invited.body));
    const id = invited.body.account_user.user_id;
    assert.equal(
      (await admin.client.patch(one(id), { roles: 'partial', install_ids: [w.install.id] })).status,
      200,
    );
    assert.equal((await admin.client.delete(one(id))).status, 204);
  });

  it("issue 28 finding 6: the owner's own (unscoped) credential still invites, promotes, demotes and removes owners", async () => {
    const w = await scene();
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const users = usersOf(w.account.id);
    const one = (userId: string) => `${users}/${userId}`;
    assert.equal(
      (await w.owner.client.post(`${users}?dry_run=true`, invitation(w.account.id, 'owner'))).status,
      200,
    );
    const invited = await w.owner.client.post(users, invitation(w.account.id, 'owner'));
    assert.equal(invited.status, 201, JSON.stringify(invited.body));
    const promoted = await w.owner.client.patch(one(member.userId), { roles: 'owner' });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.equal(
      (await w.owner.client.patch(`${one(member.userId)}?dry_run=true`, { roles: 'full' })).status,
      200,
    );
    assert.equal((await w.owner.client.patch(one(member.userId), { roles: 'full' })).status, 200);
    const promotedAgain = await w.owner.client.patch(one(member.userId), { roles: 'owner' });
    assert.equal(promotedAgain.status, 200);
    assert.equal((await w.owner.client.delete(`${one(member.userId)}?dry_run=true`)).status, 200);
    assert.equal((await w.owner.client.delete(one(member.userId))).status, 204);
  });
});
