import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, uniqueName } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);

const LIST_FIELDS = [
  'account',
  'cname',
  'created_at',
  'environment',
  'id',
  'is_multisite',
  'name',
  'php_version',
  'primary_domain',
  'site',
  'stable_ips',
  'status',
];

describe('createInstall', () => {
  it('I1-I5 creates an install in a site environment and answers 201 with the Install record', async () => {
    const w = await f.world();
    const name = uniqueName();
    const res = await w.owner.client.post('/v1/installs', {
      name,
      account_id: w.account.id,
      site_id: w.site.id,
      environment: 'staging',
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, name);
    assert.deepEqual(res.body.account, { id: w.account.id });
    assert.deepEqual(res.body.site, { id: w.site.id });
    assert.equal(res.body.environment, 'staging');
    assert.equal(res.body.cname, `${name}.hostplane.app`);
    assert.equal(res.body.primary_domain, `${name}.hostplane.app`);
    assert.equal(res.body.stable_ips, null);
    assert.ok(['active', 'pending'].includes(res.body.status));
  });

  for (const name of ['ab', 'Abc', '1abc', 'abc-def', 'a'.repeat(15), 'abc_d', '']) {
    it(`I1 rejects the name "${name}" with 400 invalid_value on field name`, async () => {
      const w = await f.world();
      const res = await w.owner.client.post('/v1/installs', {
        name,
        account_id: w.account.id,
        site_id: w.site.id,
        environment: 'staging',
      });
      assert.equal(expectFieldError(res, 'name', 'invalid_value').resource, 'install');
    });
  }

  it('I1 accepts names of 3 and 14 characters', async () => {
    const w = await f.world();
    for (const name of [
      `a${uniqueName('').slice(0, 2)}`,
      `z${uniqueName('').padEnd(13, '0').slice(0, 13)}`,
    ]) {
      const res = await w.owner.client.post('/v1/installs', {
        name,
        account_id: w.account.id,
        site_id: (await f.site(w.owner.client, w.account.id)).id,
        environment: 'production',
      });
      assert.equal(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
    }
  });

  it('I2 a taken name (in any account) gives 400 value_unavailable', async () => {
    const w = await f.world();
    const other = await f.world();
    const res = await other.owner.client.post('/v1/installs', {
      name: w.install.name,
      account_id: other.account.id,
      site_id: other.site.id,
      environment: 'staging',
    });
    expectFieldError(res, 'name', 'value_unavailable');
  });

  it('I2 two concurrent creates of one name: exactly one wins, the other gets value_unavailable', async () => {
    const w = await f.world();
    const name = uniqueName();
    const sites = [await f.site(w.owner.client, w.account.id), await f.site(w.owner.client, w.account.id)];
    const results = await Promise.all(
      sites.map((s) =>
        w.owner.client.post('/v1/installs', {
          name,
          account_id: w.account.id,
          site_id: s.id,
          environment: 'staging',
        }),
      ),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 400]);
    const loser = results.find((r) => r.status === 400);
    assert.equal(loser?.body.errors[0].type, 'value_unavailable');
  });

  it('I3 site_id and environment are required for accounts with sites enabled', async () => {
    const w = await f.world();
    const noSite = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      environment: 'staging',
    });
    expectFieldError(noSite, 'site_id');
    const noEnv = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
    });
    expectFieldError(noEnv, 'environment');
    const nullEnv = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
      environment: null,
    });
    expectFieldError(nullEnv, 'environment');
  });

  it('I3 accounts without sites enabled create installs without site or environment', async () => {
    const acct = await f.account({ sites_enabled: false });
    const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);
    const res = await owner.client.post('/v1/installs', { name: uniqueName(), account_id: acct.id });
    assert.equal(res.status, 201);
    assert.equal(res.body.site, null);
    assert.equal(res.body.environment, null);
    const withSite = await owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: acct.id,
      environment: 'production',
    });
    expectFieldError(withSite, 'environment');
  });

  it('I3 on update too: an install of an account without sites takes no site or environment; one of an account with sites keeps both', async () => {
    const acct = await f.account({ sites_enabled: false });
    const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);
    const created = await owner.client.post('/v1/installs', { name: uniqueName(), account_id: acct.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const url = `/v1/installs/${created.body.id}`;
    expectFieldError(await owner.client.patch(url, { environment: 'staging' }), 'environment');
    const w = await f.world();
    expectFieldError(await owner.client.patch(url, { site_id: w.site.id }), 'site_id');
    const unchanged = await owner.client.get(url);
    assert.equal(unchanged.body.site, null);
    assert.equal(unchanged.body.environment, null);
    // site_id is a uuid, never null (the spec's table); environment is nullable.
    const nulls = await owner.client.patch(url, { environment: null });
    assert.equal(nulls.status, 200, JSON.stringify(nulls.body));
    assert.equal(nulls.body.environment, null);

    const withSites = `/v1/installs/${w.install.id}`;
    expectFieldError(await w.owner.client.patch(withSites, { environment: null }), 'environment');
    const kept = await w.owner.client.get(withSites);
    assert.equal(kept.body.site.id, w.site.id);
    assert.equal(kept.body.environment, w.install.environment);
  });

  it('I4 a site holds at most one install per environment', async () => {
    const w = await f.world();
    const res = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
      environment: 'production',
    });
    expectFieldError(res, 'environment', 'value_unavailable');
    assert.match(res.body.message, new RegExp(w.install.name));
  });

  it('I4 two concurrent creates into one environment: exactly one wins', async () => {
    const w = await f.world();
    const results = await Promise.all(
      [uniqueName(), uniqueName()].map((name) =>
        w.owner.client.post('/v1/installs', {
          name,
          account_id: w.account.id,
          site_id: w.site.id,
          environment: 'development',
        }),
      ),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 400]);
  });

  it('I5 site_id must name a site of the same account', async () => {
    const w = await f.world();
    const other = await f.world();
    const res = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: other.site.id,
      environment: 'staging',
    });
    expectFieldError(res, 'site_id');
    const missing = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: '00000000-0000-4000-8000-000000000000',
      environment: 'staging',
    });
    expectFieldError(missing, 'site_id');
  });

  it('rejects an unknown environment value', async () => {
    const w = await f.world();
    const res = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
      environment: 'qa',
    });
    expectFieldError(res, 'environment');
  });
});

describe('getInstall and listInstalls', () => {
  it('I8 wp_version and defer_wordpress_upgrades_until appear only when one install is requested', async () => {
    const w = await f.world();
    const one = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(
      Object.keys(one.body).sort(),
      [...LIST_FIELDS, 'defer_wordpress_upgrades_until', 'maintenance_mode', 'wp_version'].sort(),
    );
    // Pending (not provisioned yet): no version until the driver read one (issue 29 defect 9).
    assert.equal(one.body.wp_version, null);
    assert.equal(one.body.defer_wordpress_upgrades_until, null);
    const list = await w.owner.client.get(`/v1/installs?account_id=${w.account.id}`);
    assert.equal(list.status, 200);
    assert.equal(list.body.count, 1);
    assert.deepEqual(Object.keys(list.body.results[0]).sort(), LIST_FIELDS);
  });

  it('issue 29 defect 9: a new install has no wp_version (null) until its provisioning reports the one its files hold', async () => {
    const w = await f.world();
    const created = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
      environment: 'staging',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'pending');
    assert.equal(created.body.wp_version, null, 'no invented version in the answer');
    const pending = await w.owner.client.get(`/v1/installs/${created.body.id}`);
    assert.equal(pending.body.wp_version, null);
    await t.runJobs();
    const active = await w.owner.client.get(`/v1/installs/${created.body.id}`);
    assert.equal(active.body.status, 'active');
    // The simulated driver's provisioning reports its simulated WordPress.
    assert.equal(active.body.wp_version, '6.7.1');
  });

  it('I7 php_version is read-only: it cannot be set on create or update', async () => {
    const w = await f.world();
    const created = await w.owner.client.post('/v1/installs', {
      name: uniqueName(),
      account_id: w.account.id,
      site_id: w.site.id,
      environment: 'staging',
      php_version: '5.6',
      status: 'pending',
    });
    assert.equal(created.status, 201);
    assert.notEqual(created.body.php_version, '5.6');
    const patched = await w.owner.client.patch(`/v1/installs/${created.body.id}`, { php_version: '5.6' });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.php_version, created.body.php_version);
  });

  it('I7 status is one of active, pending; operators set it', async () => {
    const w = await f.world();
    const res = await t.admin.patch(`/admin/v1/installs/${w.install.id}`, {
      status: 'pending',
      wp_version: '6.5.0',
    });
    assert.equal(res.status, 200);
    const got = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(got.body.status, 'pending');
    assert.equal(got.body.wp_version, '6.5.0');
    const bad = await t.admin.patch(`/admin/v1/installs/${w.install.id}`, { status: 'broken' });
    assert.equal(bad.status, 400);
  });

  it('I9 stable_ips are null except on plans that have them', async () => {
    const basic = await f.world({ plan: 'standard' });
    const refused = await t.admin.patch(`/admin/v1/installs/${basic.install.id}`, {
      stable_ips: ['192.0.2.10'],
    });
    expectFieldError(refused, 'stable_ips');
    const premium = await f.world({ plan: 'premium' });
    const set = await t.admin.patch(`/admin/v1/installs/${premium.install.id}`, {
      stable_ips: ['192.0.2.10', '192.0.2.11'],
    });
    assert.equal(set.status, 200);
    const got = await premium.owner.client.get(`/v1/installs/${premium.install.id}`);
    assert.deepEqual(got.body.stable_ips, ['192.0.2.10', '192.0.2.11']);
    const listed = await basic.owner.client.get(`/v1/installs/${basic.install.id}`);
    assert.equal(listed.body.stable_ips, null);
  });

  it('listInstalls pages across accounts and filters by account_id', async () => {
    const a = await f.account();
    const b = await f.account();
    const member = await f.user([
      { account_id: a.id, roles: 'owner' },
      { account_id: b.id, roles: 'full' },
    ]);
    const sa = await f.site(member.client, a.id);
    const sb = await f.site(member.client, b.id);
    await f.install(member.client, a.id, sa.id, 'production');
    await f.install(member.client, a.id, sa.id, 'staging');
    await f.install(member.client, b.id, sb.id, 'production');
    const all = await member.client.get('/v1/installs?limit=2');
    assert.equal(all.body.count, 3);
    assert.equal(all.body.results.length, 2);
    assert.equal(new URL(all.body.next).searchParams.get('offset'), '2');
    const onlyB = await member.client.get(`/v1/installs?account_id=${b.id}`);
    assert.equal(onlyB.body.count, 1);
  });

  it('G4 an unknown install id is 404 with the not-found message; a malformed id is 400', async () => {
    const w = await f.world();
    const missing = await w.owner.client.get('/v1/installs/00000000-0000-4000-8000-000000000000');
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { message: 'Not Found' });
    const malformed = await w.owner.client.get('/v1/installs/not-a-uuid');
    expectFieldError(malformed, 'install_id');
  });
});

describe('updateInstall', () => {
  it('I6 moves an install to another environment of its site', async () => {
    const w = await f.world();
    const res = await w.owner.client.patch(`/v1/installs/${w.install.id}`, { environment: 'staging' });
    assert.equal(res.status, 200);
    assert.equal(res.body.environment, 'staging');
    const site = await w.owner.client.get(`/v1/sites/${w.site.id}`);
    assert.equal(site.body.installs[0].environment, 'staging');
  });

  it('I6 moves an install to another site of the account, and refuses a taken environment (I4)', async () => {
    const w = await f.world();
    const target = await f.site(w.owner.client, w.account.id);
    const occupant = await f.install(w.owner.client, w.account.id, target.id, 'production');
    const clash = await w.owner.client.patch(`/v1/installs/${w.install.id}`, { site_id: target.id });
    expectFieldError(clash, 'environment', 'value_unavailable');
    assert.match(clash.body.message, new RegExp(occupant.name));
    const moved = await w.owner.client.patch(`/v1/installs/${w.install.id}`, {
      site_id: target.id,
      environment: 'development',
    });
    assert.equal(moved.status, 200);
    assert.deepEqual(moved.body.site, { id: target.id });
    assert.equal(moved.body.environment, 'development');
    const oldSite = await w.owner.client.get(`/v1/sites/${w.site.id}`);
    assert.deepEqual(oldSite.body.installs, []);
  });

  it('I5 refuses a site of another account', async () => {
    const w = await f.world();
    const other = await f.world();
    const res = await w.owner.client.patch(`/v1/installs/${w.install.id}`, { site_id: other.site.id });
    expectFieldError(res, 'site_id');
  });

  it('I6 an install may stay in place with the same environment (no self-conflict)', async () => {
    const w = await f.world();
    const res = await w.owner.client.patch(`/v1/installs/${w.install.id}`, {
      site_id: w.site.id,
      environment: 'production',
    });
    assert.equal(res.status, 200);
  });
});

describe('deleteInstall', () => {
  it("deletes the install and removes it from partial users' scopes", async () => {
    const w = await f.world();
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    assert.equal((await partial.client.get(`/v1/installs/${w.install.id}`)).status, 200);
    const res = await w.owner.client.delete(`/v1/installs/${w.install.id}`);
    assert.equal(res.status, 204);
    assert.equal(res.raw.body, '');
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).status, 404);
    const user = await t.admin.get(`/admin/v1/users/${partial.userId}`);
    assert.equal(user.status, 200);
    assert.deepEqual(user.body.memberships, [
      { account_id: w.account.id, roles: 'partial', install_ids: [] },
    ]);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 404);
  });
});
