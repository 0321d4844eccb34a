import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);

describe('listAccounts and getAccount', () => {
  it('lists only the accounts the caller belongs to, paginated (G6)', async () => {
    const a = await f.account({ name: 'Alpha Co' });
    const b = await f.account({ name: 'Beta Co' });
    await f.account({ name: 'Gamma Co' });
    const member = await f.user([
      { account_id: a.id, roles: 'owner' },
      { account_id: b.id, roles: 'partial' },
    ]);
    const res = await member.client.get('/v1/accounts');
    assert.equal(res.status, 200);
    assert.equal(res.body.count, 2);
    assert.deepEqual(res.body.results, [
      { id: a.id, name: 'Alpha Co', nickname: 'Alpha Co' },
      { id: b.id, name: 'Beta Co', nickname: 'Beta Co' },
    ]);
    const page = await member.client.get('/v1/accounts?limit=1&offset=1');
    assert.deepEqual(page.body.results, [{ id: b.id, name: 'Beta Co', nickname: 'Beta Co' }]);
    assert.equal(new URL(page.body.previous).searchParams.get('offset'), '0');
    assert.equal(page.body.next, null);
  });

  it('G4 gets a member account; a foreign or unknown account is 404', async () => {
    const w = await f.world();
    const other = await f.account();
    const mine = await w.owner.client.get(`/v1/accounts/${w.account.id}`);
    assert.equal(mine.status, 200);
    assert.deepEqual(mine.body, { id: w.account.id, name: w.account.name, nickname: w.account.name });
    const foreign = await w.owner.client.get(`/v1/accounts/${other.id}`);
    assert.equal(foreign.status, 404);
    assert.deepEqual(foreign.body, { message: 'Not Found' });
  });

  it('a user with no memberships sees an empty list', async () => {
    const loner = await f.user([]);
    const res = await loner.client.get('/v1/accounts');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { previous: null, next: null, count: 0, results: [] });
  });
});

describe('getCurrentUser', () => {
  it('returns the user behind the credential', async () => {
    const w = await f.world();
    const res = await w.owner.client.get('/v1/user');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      id: w.owner.userId,
      first_name: 'Test',
      last_name: 'User',
      email: w.owner.email,
      phone_number: null,
    });
  });
});

describe('G2 Basic auth', () => {
  it('accepts the scheme name in any case and refuses a credential without a colon', async () => {
    const w = await f.world();
    const username = w.owner.username;
    const ok = await t.anonymous.request('GET', '/v1/user', undefined, {
      authorization: `basic ${Buffer.from(`${username}:nope`).toString('base64')}`,
    });
    assert.equal(ok.status, 401);
    const noColon = await t.anonymous.request('GET', '/v1/user', undefined, {
      authorization: `Basic ${Buffer.from(username).toString('base64')}`,
    });
    assert.equal(noColon.status, 401);
    assert.deepEqual(noColon.body, { message: 'Bad Credentials' });
  });

  it('a membership change made through the admin API applies to the next request (cache invalidated)', async () => {
    const w = await f.world();
    const user = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    assert.equal((await user.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
    const removed = await t.admin.delete(`/admin/v1/users/${user.userId}/memberships/${w.account.id}`);
    assert.equal(removed.status, 204);
    assert.equal((await user.client.get(`/v1/accounts/${w.account.id}`)).status, 404);
    const partial = await t.admin.put(`/admin/v1/users/${user.userId}/memberships/${w.account.id}`, {
      roles: 'partial',
      install_ids: [w.install.id],
    });
    assert.equal(partial.status, 200);
    assert.equal((await user.client.get(`/v1/accounts/${w.account.id}`)).status, 200);
    const create = await user.client.post('/v1/sites', { name: 'X', account_id: w.account.id });
    assert.equal(create.status, 403);
  });
});
