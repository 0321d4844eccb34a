import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, clientFor } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);

describe('admin accounts', () => {
  it('creates an account with defaults', async () => {
    const res = await t.admin.post('/admin/v1/accounts', { name: 'Acme' });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, 'Acme');
    assert.equal(res.body.sites_enabled, true);
    assert.equal(res.body.preferred_data_center, null);
    assert.equal(res.body.plan, 'standard');
  });

  it('an id already taken is 400 value_unavailable, never a 500 (found by the fuzzer, seed 13)', async () => {
    const first = await f.account();
    const again = await t.admin.post('/admin/v1/accounts', { id: first.id, name: 'Twin' });
    expectFieldError(again, 'id', 'value_unavailable');
  });

  it('validates the body with G7 errors', async () => {
    const res = await t.admin.post('/admin/v1/accounts', { name: '', sites_enabled: 'yes please' });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field).sort(), [
      'name',
      'sites_enabled',
    ]);
  });
});

describe('admin users, memberships and credentials', () => {
  it('A1 creates a user with memberships, and refuses unknown roles', async () => {
    const acct = await f.account();
    const bad = await t.admin.post('/admin/v1/users', {
      email: 'x@example.test',
      first_name: 'X',
      last_name: 'Y',
      memberships: [{ account_id: acct.id, roles: 'admin' }],
    });
    expectFieldError(bad, 'memberships[0].roles');
    for (const roles of ['owner', 'full', 'full,billing', 'partial', 'partial,billing']) {
      const user = await t.admin.post('/admin/v1/users', {
        email: `${roles.replace(',', '-')}-${acct.id.slice(0, 8)}@example.test`,
        first_name: 'A',
        last_name: 'B',
        memberships: [{ account_id: acct.id, roles }],
      });
      assert.equal(user.status, 201, JSON.stringify(user.body));
      assert.equal(user.body.memberships[0].roles, roles);
    }
  });

  it('A2 install_ids must be installs of the account, and only for partial roles', async () => {
    const w = await f.world();
    const other = await f.world();
    const foreign = await t.admin.post('/admin/v1/users', {
      email: `p-${w.account.id.slice(0, 8)}@example.test`,
      first_name: 'P',
      last_name: 'Q',
      memberships: [{ account_id: w.account.id, roles: 'partial', install_ids: [other.install.id] }],
    });
    expectFieldError(foreign, 'memberships[0].install_ids');
    assert.match(foreign.body.message, new RegExp(other.install.id));
    const notPartial = await t.admin.post('/admin/v1/users', {
      email: `f-${w.account.id.slice(0, 8)}@example.test`,
      first_name: 'P',
      last_name: 'Q',
      memberships: [{ account_id: w.account.id, roles: 'full', install_ids: [w.install.id] }],
    });
    assert.equal(notPartial.status, 400);
  });

  it('a duplicate email (any case) is 400 value_unavailable', async () => {
    const first = await t.admin.post('/admin/v1/users', {
      email: 'Dup@Example.test',
      first_name: 'A',
      last_name: 'B',
    });
    assert.equal(first.status, 201);
    const second = await t.admin.post('/admin/v1/users', {
      email: 'dup@example.TEST',
      first_name: 'A',
      last_name: 'B',
    });
    expectFieldError(second, 'email', 'value_unavailable');
  });

  it('issues a credential that works for Basic auth; the password is shown once and stored hashed', async () => {
    const acct = await f.account();
    const user = await t.admin.post('/admin/v1/users', {
      email: `c-${acct.id.slice(0, 8)}@example.test`,
      first_name: 'C',
      last_name: 'D',
      memberships: [{ account_id: acct.id, roles: 'owner' }],
    });
    const cred = await t.admin.post(`/admin/v1/users/${user.body.id}/credentials`);
    assert.equal(cred.status, 201);
    assert.match(cred.body.username, /^hp_[0-9a-f]{16}$/);
    assert.ok(cred.body.password.length >= 32);
    const client = clientFor(t.app, basic(cred.body.username, cred.body.password));
    assert.equal((await client.get('/v1/user')).status, 200);
    const [row] = await queryRows<{ password_hash: string }>(
      t.database.db,
      sql`select password_hash from credentials where username = ${cred.body.username}`,
    );
    const hash = row?.password_hash ?? '';
    assert.match(hash, /^scrypt\$/);
    assert.ok(!hash.includes(cred.body.password));
  });

  it('404 for credentials or memberships of an unknown user', async () => {
    const acct = await f.account();
    const unknown = '00000000-0000-4000-8000-000000000000';
    assert.equal((await t.admin.post(`/admin/v1/users/${unknown}/credentials`)).status, 404);
    const put = await t.admin.put(`/admin/v1/users/${unknown}/memberships/${acct.id}`, { roles: 'full' });
    assert.equal(put.status, 404);
    assert.equal((await t.admin.delete(`/admin/v1/users/${unknown}/memberships/${acct.id}`)).status, 404);
    assert.equal((await t.admin.get(`/admin/v1/users/${unknown}`)).status, 404);
  });
});

describe('admin site and install flags', () => {
  it('S4 sets sandbox and transferable; 404 for an unknown site', async () => {
    const w = await f.world();
    const res = await t.admin.patch(`/admin/v1/sites/${w.site.id}`, { sandbox: true });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { id: w.site.id, sandbox: true, transferable: true });
    const missing = await t.admin.patch('/admin/v1/sites/00000000-0000-4000-8000-000000000000', {
      sandbox: true,
    });
    assert.equal(missing.status, 404);
  });

  it('404 for an unknown install', async () => {
    const res = await t.admin.patch('/admin/v1/installs/00000000-0000-4000-8000-000000000000', {
      status: 'active',
    });
    assert.equal(res.status, 404);
  });
  it('an empty PATCH (no known field) changes nothing and answers the record, never a 500 (found by the fuzzer, seed 13)', async () => {
    const w = await f.world();
    const site = await t.admin.patch(`/admin/v1/sites/${w.site.id}`, {});
    assert.equal(site.status, 200, JSON.stringify(site.body));
    assert.deepEqual(site.body, { id: w.site.id, sandbox: false, transferable: true });
    const install = await t.admin.patch(`/admin/v1/installs/${w.install.id}`, { unknown: 1 });
    assert.equal(install.status, 200, JSON.stringify(install.body));
    assert.equal(install.body.id, w.install.id);
    const missing = await t.admin.patch('/admin/v1/sites/00000000-0000-4000-8000-000000000000', {});
    assert.equal(missing.status, 404);
  });
});

describe('seed', () => {
  it('loads accounts, sites, installs, users and credentials that then work through the API', async () => {
    const accountId = '11111111-1111-4111-8111-111111111111';
    const siteId = '22222222-2222-4222-8222-222222222222';
    const counts = await t.app.services.admin.seed({
      accounts: [{ id: accountId, name: 'Seeded', preferred_data_center: 'eu-west' }],
      sites: [{ id: siteId, account_id: accountId, name: 'Seeded Site', sandbox: true }],
      installs: [{ account_id: accountId, site_id: siteId, name: 'seededprod', environment: 'production' }],
      users: [
        {
          email: 'seed@example.test',
          first_name: 'Seed',
          last_name: 'User',
          memberships: [{ account_id: accountId, roles: 'owner' }],
          credentials: [{ username: 'seeded-owner', password: 'seeded-password-123' }],
        },
      ],
    });
    assert.deepEqual(counts, { accounts: 1, sites: 1, installs: 1, users: 1, credentials: 1 });
    const client = clientFor(t.app, basic('seeded-owner', 'seeded-password-123'));
    const sites = await client.get(`/v1/sites?account_id=${accountId}`);
    assert.equal(sites.body.count, 1);
    assert.equal(sites.body.results[0].sandbox, true);
    assert.equal(sites.body.results[0].installs[0].name, 'seededprod');
  });

  it('names the failing item', async () => {
    await assert.rejects(
      t.app.services.admin.seed({
        installs: [{ account_id: '33333333-3333-4333-8333-333333333333', name: 'orphan' }],
      }),
      /seed: installs\[0\]/,
    );
  });
});
