import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Role } from '../../src/auth/access.js';
import { expectFieldError } from '../support/assertions.js';
import { factories, type Member } from '../support/factories.js';
import { buildTestApp, clientFor, type Json, type Res, startApp } from '../support/harness.js';
import { expectForbidden, expectNotFound, idsOf } from '../support/security.js';

// A real credential cache (AUTH_CACHE_SECONDS=10, the default): role changes must still apply at once.
const t = await buildTestApp({ env: { AUTH_CACHE_SECONDS: '10' } });
// A second API process on the same database, with its own credential cache (decisions.md #7).
const other = await startApp(t.database, { env: { AUTH_CACHE_SECONDS: '10' } });
after(() => other.close());
const f = factories(t);

const email = () => `new-${randomBytes(4).toString('hex')}@Example.test`;
const usersOf = (accountId: string) => `/v1/accounts/${accountId}/account_users`;
const userUrl = (accountId: string, userId: string) => `${usersOf(accountId)}/${userId}`;

function newUser(accountId: string, roles: string, extra: Record<string, unknown> = {}) {
  return {
    user: {
      account_id: accountId,
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: email(),
      roles,
      ...extra,
    },
  };
}

async function created(res: Res): Promise<Json> {
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.account_user;
}

/** An account with an owner and one member per other role. */
async function team() {
  const w = await f.world();
  const members = { owner: w.owner } as Record<Role, Member>;
  for (const roles of ['full', 'full,billing', 'partial', 'partial,billing'] as const) {
    members[roles] = await f.user([
      {
        account_id: w.account.id,
        roles,
        ...(roles.startsWith('partial') && { install_ids: [w.install.id] }),
      },
    ]);
  }
  return { ...w, members };
}

describe('createAccountUser', () => {
  it('U1 U4 an owner adds a user: 201 with message and the AccountUser record', async () => {
    const w = await f.world();
    const body = newUser(w.account.id, 'full');
    const res = await w.owner.client.post(usersOf(w.account.id), body);
    const user = await created(res);
    assert.equal(res.body.message, 'Your change was successful.');
    assert.deepEqual(Object.keys(user).sort(), [
      'account_id',
      'email',
      'first_name',
      'invite_accepted',
      'last_name',
      'mfa_enabled',
      'phone',
      'roles',
      'user_id',
    ]);
    assert.equal(user.account_id, w.account.id);
    assert.equal(user.email, body.user.email);
    assert.equal(user.first_name, 'Ada');
    assert.equal(user.last_name, 'Lovelace');
    assert.equal(user.phone, null);
    assert.equal(user.roles, 'full');
    assert.equal(user.invite_accepted, false);
    assert.equal(user.mfa_enabled, false);
    const got = await w.owner.client.get(userUrl(w.account.id, user.user_id));
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, user);
  });

  it('U1 requires user with account_id, first_name, last_name, email and roles: one G7 error each', async () => {
    const w = await f.world();
    const none = await w.owner.client.post(usersOf(w.account.id), {});
    expectFieldError(none, 'user', undefined, 'required');
    const empty = await w.owner.client.post(usersOf(w.account.id), { user: {} });
    for (const field of ['account_id', 'first_name', 'last_name', 'email', 'roles']) {
      expectFieldError(empty, `user.${field}`, undefined, 'required');
    }
    const bad = await w.owner.client.post(
      usersOf(w.account.id),
      newUser(w.account.id, 'full', { email: 'nope' }),
    );
    expectFieldError(bad, 'user.email', undefined, 'format');
  });

  it('U1 user.account_id must be the account of the path', async () => {
    const w = await f.world();
    const mine = await f.world();
    const res = await w.owner.client.post(usersOf(w.account.id), newUser(mine.account.id, 'full'));
    expectFieldError(res, 'user.account_id');
  });

  it('U2 roles is one of the five values', async () => {
    const w = await f.world();
    for (const roles of ['admin', 'billing', 'full, billing', 'Owner', '']) {
      expectFieldError(
        await w.owner.client.post(usersOf(w.account.id), newUser(w.account.id, roles)),
        'user.roles',
      );
    }
    for (const roles of ['owner', 'full', 'full,billing', 'partial', 'partial,billing']) {
      const user = await created(
        await w.owner.client.post(usersOf(w.account.id), newUser(w.account.id, roles)),
      );
      assert.equal(user.roles, roles);
    }
  });

  it('U3 install_ids scope a partial user to installs of the account, shown as installs [{id, name}]', async () => {
    const w = await f.world();
    const foreign = await f.world();
    const user = await created(
      await w.owner.client.post(
        usersOf(w.account.id),
        newUser(w.account.id, 'partial', { install_ids: [w.install.id, w.install.id] }),
      ),
    );
    assert.deepEqual(user.installs, [{ id: w.install.id, name: w.install.name }]);
    const notOurs = await w.owner.client.post(
      usersOf(w.account.id),
      newUser(w.account.id, 'partial', { install_ids: [foreign.install.id] }),
    );
    expectFieldError(notOurs, 'user.install_ids', undefined, 'install_not_in_account');
    const notPartial = await w.owner.client.post(
      usersOf(w.account.id),
      newUser(w.account.id, 'full', { install_ids: [w.install.id] }),
    );
    expectFieldError(notPartial, 'user.install_ids', undefined, 'not_partial');
    const malformed = await w.owner.client.post(
      usersOf(w.account.id),
      newUser(w.account.id, 'partial', { install_ids: ['x'] }),
    );
    expectFieldError(malformed, 'user.install_ids[0]', undefined, 'format');
  });

  it('U1 the same e-mail cannot be added twice to one account (any letter case): 400 value_unavailable', async () => {
    const w = await f.world();
    const body = newUser(w.account.id, 'full');
    await created(await w.owner.client.post(usersOf(w.account.id), body));
    const again = await w.owner.client.post(usersOf(w.account.id), {
      user: { ...body.user, email: body.user.email.toUpperCase(), roles: 'partial' },
    });
    const error = expectFieldError(again, 'user.email', undefined, 'already_member');
    assert.equal(error.type, 'value_unavailable');
    const list = await w.owner.client.get(usersOf(w.account.id));
    assert.equal(list.body.count, 2);
  });

  it('A1 a user may belong to several accounts with different roles, and sees each with its own scope', async () => {
    const a = await f.world();
    const b = await f.world();
    const person = await f.user([]);
    const inA = await created(
      await a.owner.client.post(usersOf(a.account.id), {
        user: {
          account_id: a.account.id,
          first_name: 'X',
          last_name: 'Y',
          email: person.email,
          roles: 'owner',
        },
      }),
    );
    const inB = await created(
      await b.owner.client.post(usersOf(b.account.id), {
        user: {
          account_id: b.account.id,
          first_name: 'X',
          last_name: 'Y',
          email: person.email,
          roles: 'partial',
          install_ids: [],
        },
      }),
    );
    assert.equal(inA.user_id, person.userId);
    assert.equal(inB.user_id, person.userId);
    // The existing user keeps its name and credential, and sees both accounts at once.
    assert.equal(inA.first_name, 'Test');
    assert.deepEqual(idsOf(await person.client.get('/v1/accounts')), [a.account.id, b.account.id].sort());
    assert.deepEqual(idsOf(await person.client.get('/v1/installs')), [a.install.id]);
    assert.equal((await person.client.get(usersOf(a.account.id))).status, 200);
    expectForbidden(await person.client.get(usersOf(b.account.id)));
  });
});

describe('invitation without SMTP_URL', () => {
  it('the invitation is kept in the outbox with its link (GET /admin/v1/mail), and the link works', async () => {
    const w = await f.world();
    const user = await created(
      await w.owner.client.post(usersOf(w.account.id), newUser(w.account.id, 'full')),
    );
    await t.runJobs();
    const mail = await t.admin.get('/admin/v1/mail?limit=100');
    const kept = mail.body.results.find((m: Json) => m.to === user.email);
    assert.equal(kept.status, 'kept');
    assert.equal(kept.event, 'account_user.invited');
    const path = /\/v1\/invitations\/[A-Za-z0-9_-]{43}\/accept/.exec(kept.text)?.[0];
    assert.ok(path, kept.text);
    const accepted = await t.anonymous.post(path);
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    assert.ok(accepted.body.credential.password);
  });
});

describe('listAccountUsers and getAccountUser', () => {
  it('U4 lists the members in the G6 envelope, oldest first: last_owner on owners, installs on partial members', async () => {
    const w = await team();
    const res = await w.owner.client.get(usersOf(w.account.id));
    assert.equal(res.status, 200);
    assert.equal(res.body.count, 5);
    const roles = res.body.results.map((u: Json) => u.roles);
    assert.deepEqual(roles, ['owner', 'full', 'full,billing', 'partial', 'partial,billing']);
    const [owner, full, , partial] = res.body.results;
    assert.equal(owner.last_owner, true);
    assert.equal(owner.invite_accepted, true, 'an operator-made membership has no pending invitation');
    assert.ok(!('installs' in owner));
    assert.ok(!('last_owner' in full) && !('installs' in full));
    assert.deepEqual(partial.installs, [{ id: w.install.id, name: w.install.name }]);
    const page = await w.owner.client.get(`${usersOf(w.account.id)}?limit=2&offset=2`);
    assert.deepEqual(
      page.body.results.map((u: Json) => u.roles),
      ['full,billing', 'partial'],
    );
    assert.match(page.body.next, /offset=4$/);
    assert.match(page.body.previous, /offset=0$/);
  });

  it('G4 a user who is not a member of the account is 404 under it; an unknown account is 404', async () => {
    const w = await f.world();
    const stranger = await f.world();
    expectNotFound(await w.owner.client.get(userUrl(w.account.id, stranger.owner.userId)));
    expectNotFound(await w.owner.client.get(userUrl(w.account.id, w.install.id)));
    expectNotFound(await w.owner.client.get(usersOf(stranger.account.id)));
  });
});

describe('last owner', () => {
  it('the only owner cannot be demoted or removed (400 last_owner); with a second owner both are allowed', async () => {
    const w = await f.world();
    const url = userUrl(w.account.id, w.owner.userId);
    expectFieldError(await w.owner.client.patch(url, { roles: 'full' }), 'roles', undefined, 'last_owner');
    expectFieldError(await w.owner.client.delete(url), 'roles', undefined, 'last_owner');
    assert.equal((await w.owner.client.get(url)).body.roles, 'owner');

    const second = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const promoted = await w.owner.client.patch(userUrl(w.account.id, second.userId), { roles: 'owner' });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.equal(promoted.body.message, 'Your change was successful.');
    assert.equal(promoted.body.account_user.last_owner, false);
    assert.equal((await w.owner.client.get(url)).body.last_owner, false);

    const demoted = await w.owner.client.patch(url, { roles: 'full' });
    assert.equal(demoted.status, 200, JSON.stringify(demoted.body));
    const now = await second.client.get(userUrl(w.account.id, second.userId));
    assert.equal(now.body.last_owner, true);
    // The demoted user can no longer touch the remaining owner (no escalation)...
    expectForbidden(await w.owner.client.delete(userUrl(w.account.id, second.userId)));
    // ...and the remaining owner cannot leave either.
    expectFieldError(
      await second.client.delete(userUrl(w.account.id, second.userId)),
      'roles',
      undefined,
      'last_owner',
    );
  });

  it('two owners demoting each other at once leave exactly one owner', async () => {
    const w = await f.world();
    const second = await f.user([{ account_id: w.account.id, roles: 'owner' }]);
    const [x, y] = await Promise.all([
      w.owner.client.patch(userUrl(w.account.id, second.userId), { roles: 'full' }),
      second.client.patch(userUrl(w.account.id, w.owner.userId), { roles: 'full' }),
    ]);
    const statuses = [x.status, y.status].sort();
    assert.ok(
      JSON.stringify(statuses) === '[200,400]' || JSON.stringify(statuses) === '[200,403]',
      `${x.status} ${y.status}`,
    );
    const list = await w.owner.client.get(usersOf(w.account.id));
    const owners = (
      list.status === 200 ? list : await second.client.get(usersOf(w.account.id))
    ).body.results.filter((u: Json) => u.roles === 'owner');
    assert.equal(owners.length, 1);
    assert.equal(owners[0].last_owner, true);
  });
});

describe('no escalation', () => {
  it('A1 full users cannot grant owner or full,billing, nor change or remove an owner', async () => {
    const w = await team();
    const full = w.members.full.client;
    for (const roles of ['owner', 'full,billing']) {
      expectForbidden(await full.post(usersOf(w.account.id), newUser(w.account.id, roles)));
    }
    for (const roles of ['full', 'partial', 'partial,billing']) {
      await created(await full.post(usersOf(w.account.id), newUser(w.account.id, roles)));
    }
    expectForbidden(
      await full.patch(userUrl(w.account.id, w.owner.userId), { roles: 'partial', install_ids: [] }),
    );
    expectForbidden(await full.delete(userUrl(w.account.id, w.owner.userId)));
    expectForbidden(await full.delete(userUrl(w.account.id, w.members['full,billing'].userId)));
    // Nor raise itself or another member above full.
    expectForbidden(
      await full.patch(userUrl(w.account.id, w.members.full.userId), { roles: 'full,billing' }),
    );
    expectForbidden(await full.patch(userUrl(w.account.id, w.members.partial.userId), { roles: 'owner' }));
    const list = await w.owner.client.get(usersOf(w.account.id));
    assert.deepEqual(
      list.body.results.filter((u: Json) => u.roles === 'owner').map((u: Json) => u.user_id),
      [w.owner.userId],
    );
  });

  it('A1 full,billing may grant up to full,billing but not owner; the owner may grant everything', async () => {
    const w = await team();
    const fb = w.members['full,billing'].client;
    expectForbidden(await fb.post(usersOf(w.account.id), newUser(w.account.id, 'owner')));
    await created(await fb.post(usersOf(w.account.id), newUser(w.account.id, 'full,billing')));
    expectForbidden(await fb.patch(userUrl(w.account.id, w.members.full.userId), { roles: 'owner' }));
    const ok = await fb.patch(userUrl(w.account.id, w.members.full.userId), { roles: 'full,billing' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    await created(await w.owner.client.post(usersOf(w.account.id), newUser(w.account.id, 'owner')));
  });

  it('A1 partial members manage no users (403), whatever role they ask for', async () => {
    const w = await team();
    for (const role of ['partial', 'partial,billing'] as const) {
      const client = w.members[role].client;
      expectForbidden(await client.post(usersOf(w.account.id), newUser(w.account.id, 'partial')));
      expectForbidden(await client.patch(userUrl(w.account.id, w.members[role].userId), { roles: 'full' }));
      expectForbidden(await client.get(usersOf(w.account.id)));
    }
  });
});

describe('updateAccountUser', () => {
  it('U3 install_ids follow the role: kept when omitted on a partial user, refused for full, emptied on demotion', async () => {
    const w = await team();
    const partialUrl = userUrl(w.account.id, w.members.partial.userId);
    const kept = await w.owner.client.patch(partialUrl, { roles: 'partial,billing' });
    assert.deepEqual(kept.body.account_user.installs, [{ id: w.install.id, name: w.install.name }]);
    expectFieldError(
      await w.owner.client.patch(partialUrl, { roles: 'full', install_ids: [w.install.id] }),
      'install_ids',
      undefined,
      'not_partial',
    );
    const full = await w.owner.client.patch(partialUrl, { roles: 'full' });
    assert.equal(full.body.account_user.roles, 'full');
    assert.ok(!('installs' in full.body.account_user));
    const back = await w.owner.client.patch(partialUrl, { roles: 'partial' });
    assert.deepEqual(back.body.account_user.installs, []);
    expectFieldError(
      await w.owner.client.patch(partialUrl, { roles: 'partial', install_ids: [w.account.id] }),
      'install_ids',
    );
    expectFieldError(await w.owner.client.patch(partialUrl, {}), 'roles', undefined, 'required');
  });

  it('A2 a role change applies at once, in this process and in another one, despite the credential cache', async () => {
    const w = await team();
    const member = w.members.full;
    const elsewhere = clientFor(other.app, member.authorization);
    // Both processes have the member's credential cached with its full role.
    assert.equal((await member.client.get(`/v1/installs/${w.install.id}`)).status, 200);
    assert.equal((await elsewhere.get(`/v1/installs/${w.install.id}`)).status, 200);
    assert.equal((await elsewhere.get(usersOf(w.account.id))).status, 200);

    const res = await w.owner.client.patch(userUrl(w.account.id, member.userId), {
      roles: 'partial',
      install_ids: [],
    });
    assert.equal(res.status, 200);
    // This process: at once.
    expectNotFound(await member.client.get(`/v1/installs/${w.install.id}`));
    expectForbidden(await member.client.get(usersOf(w.account.id)));
    // The other process re-reads the membership epoch at most once a second (by its clock).
    other.clock.advance(1000);
    expectNotFound(await elsewhere.get(`/v1/installs/${w.install.id}`));
    expectForbidden(await elsewhere.get(usersOf(w.account.id)));
  });
});

describe('deleteAccountUser', () => {
  it('removes the membership only (204): the user loses the account at once, keeps its others and its credential', async () => {
    const a = await f.world();
    const b = await f.world();
    const member = await f.user([
      { account_id: a.account.id, roles: 'full' },
      { account_id: b.account.id, roles: 'partial', install_ids: [b.install.id] },
    ]);
    const elsewhere = clientFor(other.app, member.authorization);
    assert.equal((await member.client.get(`/v1/accounts/${a.account.id}`)).status, 200);
    assert.equal((await elsewhere.get(`/v1/accounts/${a.account.id}`)).status, 200);
    const res = await a.owner.client.delete(userUrl(a.account.id, member.userId));
    assert.equal(res.status, 204);
    expectNotFound(await member.client.get(`/v1/accounts/${a.account.id}`));
    expectNotFound(await a.owner.client.get(userUrl(a.account.id, member.userId)));
    expectNotFound(await a.owner.client.delete(userUrl(a.account.id, member.userId)));
    assert.deepEqual(idsOf(await member.client.get('/v1/accounts')), [b.account.id]);
    other.clock.advance(1000);
    expectNotFound(await elsewhere.get(`/v1/accounts/${a.account.id}`));
  });

  it('a member may leave an account, unless it is the last owner', async () => {
    const w = await team();
    const res = await w.members.full.client.delete(userUrl(w.account.id, w.members.full.userId));
    assert.equal(res.status, 204);
    expectNotFound(await w.members.full.client.get(`/v1/accounts/${w.account.id}`));
  });
});

describe('mfa_enabled', () => {
  it('is false unless an operator sets it through PATCH /admin/v1/users/{id}', async () => {
    const w = await f.world();
    const url = userUrl(w.account.id, w.owner.userId);
    assert.equal((await w.owner.client.get(url)).body.mfa_enabled, false);
    const set = await t.admin.patch(`/admin/v1/users/${w.owner.userId}`, { mfa_enabled: true });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.mfa_enabled, true);
    assert.equal((await w.owner.client.get(url)).body.mfa_enabled, true);
    expectNotFound(await t.admin.patch(`/admin/v1/users/${w.account.id}`, { mfa_enabled: true }));
  });
});

describe('issue 20 house 4: roles are a typed column', () => {
  it('the database refuses a role outside the five (memberships_roles_check, migration 0011)', async () => {
    const w = await f.world();
    await assert.rejects(
      t.database.db.execute(sql`update memberships set roles = 'admin' where account_id = ${w.account.id}`),
      (err: Error & { cause?: { code?: string } }) => {
        const code = (err as { code?: string }).code ?? err.cause?.code;
        assert.equal(code, '23514', String(err));
        return true;
      },
    );
    assert.equal((await w.owner.client.get(usersOf(w.account.id))).body.results[0].roles, 'owner');
  });
});
