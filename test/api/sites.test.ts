import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, clientFor, startApp } from '../support/harness.js';

const t = await buildTestApp();
const f = factories(t);
// The same database behind a proxy-style public address (G6: links use PUBLIC_URL when set).
const proxied = await startApp(t.database, { env: { PUBLIC_URL: 'https://api.example.test/hosting' } });
after(() => proxied.close());

describe('listSites', () => {
  it('S1 lists the sites of every account the caller belongs to, in the G6 envelope', async () => {
    const a = await f.account();
    const b = await f.account();
    const member = await f.user([
      { account_id: a.id, roles: 'owner' },
      { account_id: b.id, roles: 'full' },
    ]);
    const s1 = await f.site(member.client, a.id, 'Alpha');
    const s2 = await f.site(member.client, b.id, 'Beta');
    const res = await member.client.get('/v1/sites');
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.body).sort(), ['count', 'next', 'previous', 'results']);
    assert.equal(res.body.count, 2);
    assert.deepEqual(
      res.body.results.map((s: { id: string }) => s.id),
      [s1.id, s2.id],
    );
    assert.equal(res.body.next, null);
    assert.equal(res.body.previous, null);
  });

  it('S1 filters by account_id, and a foreign account_id gives an empty page (G12: no 404 here)', async () => {
    const w = await f.world();
    const other = await f.world();
    const mine = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}`);
    assert.equal(mine.status, 200);
    assert.equal(mine.body.count, 1);
    assert.equal(mine.body.results[0].id, w.site.id);
    const foreign = await w.owner.client.get(`/v1/sites?account_id=${other.account.id}`);
    assert.equal(foreign.status, 200);
    assert.equal(foreign.body.count, 0);
    assert.deepEqual(foreign.body.results, []);
  });

  it('S3 a site lists its installs with id, name, environment, cname, php_version, is_multisite', async () => {
    const w = await f.world();
    const staging = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const res = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}`);
    const site = res.body.results[0];
    assert.equal(site.account.id, w.account.id);
    assert.equal(site.sandbox, false);
    assert.equal(site.transferable, true);
    assert.deepEqual(site.tags, []);
    assert.equal(site.group_name, null);
    assert.match(site.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(
      site.installs.map((i: { name: string }) => i.name),
      [w.install.name, staging.name],
    );
    assert.deepEqual(Object.keys(site.installs[0]).sort(), [
      'cname',
      'environment',
      'id',
      'is_multisite',
      'name',
      'php_version',
    ]);
    assert.equal(site.installs[1].environment, 'staging');
    assert.equal(site.installs[1].cname, `${staging.name}.hostplane.app`);
  });

  it('G5/G6 pages with limit and offset and absolute next/previous URLs keeping the query', async () => {
    const w = await f.world();
    for (let i = 0; i < 4; i++) await f.site(w.owner.client, w.account.id, `Site ${i}`);
    const first = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}&limit=2`);
    assert.equal(first.status, 200);
    assert.equal(first.body.count, 5);
    assert.equal(first.body.results.length, 2);
    assert.equal(first.body.previous, null);
    const next = new URL(first.body.next);
    assert.equal(next.protocol, 'http:');
    assert.equal(next.pathname, '/v1/sites');
    assert.equal(next.searchParams.get('offset'), '2');
    assert.equal(next.searchParams.get('limit'), '2');
    assert.equal(next.searchParams.get('account_id'), w.account.id);
    const second = await w.owner.client.get(`${next.pathname}${next.search}`);
    assert.equal(second.body.results.length, 2);
    assert.equal(new URL(second.body.previous).searchParams.get('offset'), '0');
    const last = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}&limit=2&offset=4`);
    assert.equal(last.body.results.length, 1);
    assert.equal(last.body.next, null);
    const ids = [...first.body.results, ...second.body.results, ...last.body.results].map((s) => s.id);
    assert.equal(new Set(ids).size, 5);
  });

  it('G5 an offset past the end returns the count and no results', async () => {
    const w = await f.world();
    const res = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}&offset=5`);
    assert.equal(res.status, 200);
    assert.equal(res.body.count, 1);
    assert.deepEqual(res.body.results, []);
    assert.equal(new URL(res.body.previous).searchParams.get('offset'), '0');
  });

  it('A2 a partial member lists only the sites holding their installs, and only those installs', async () => {
    const w = await f.world();
    const other = await f.site(w.owner.client, w.account.id);
    await f.install(w.owner.client, w.account.id, other.id, 'production');
    const staging = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const partial = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [staging.id] }]);
    const res = await partial.client.get(`/v1/sites?account_id=${w.account.id}`);
    assert.equal(res.status, 200);
    assert.equal(res.body.count, 1);
    assert.deepEqual(
      res.body.results.map((s: { id: string }) => s.id),
      [w.site.id],
    );
    assert.deepEqual(
      res.body.results[0].installs.map((i: { id: string }) => i.id),
      [staging.id],
    );
  });

  it('G5 limit=0 returns the count and no results, and no next/previous links', async () => {
    const w = await f.world();
    const res = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}&limit=0&offset=1`);
    assert.equal(res.status, 200);
    assert.equal(res.body.count, 1);
    assert.deepEqual(res.body.results, []);
    assert.equal(res.body.next, null);
    assert.equal(res.body.previous, null);
  });

  it('G6 next/previous are built from PUBLIC_URL when it is set (scheme, host and path prefix)', async () => {
    const w = await f.world();
    for (let i = 0; i < 2; i++) await f.site(w.owner.client, w.account.id);
    const client = clientFor(proxied.app, w.owner.authorization);
    const res = await client.get(`/v1/sites?account_id=${w.account.id}&limit=1&offset=1`);
    assert.equal(res.status, 200);
    assert.equal(
      res.body.next,
      `https://api.example.test/hosting/v1/sites?account_id=${w.account.id}&limit=1&offset=2`,
    );
    assert.equal(
      res.body.previous,
      `https://api.example.test/hosting/v1/sites?account_id=${w.account.id}&limit=1&offset=0`,
    );
  });

  for (const query of ['limit=101', 'limit=-1', 'limit=abc', 'offset=-1', 'offset=1.5', 'account_id=nope']) {
    it(`G5 rejects ${query} with 400 and a field error (G7)`, async () => {
      const w = await f.world();
      const res = await w.owner.client.get(`/v1/sites?${query}`);
      assert.equal(res.status, 400);
      assert.equal(typeof res.body.message, 'string');
      assert.equal(res.body.errors.length, 1);
      const [error] = res.body.errors;
      assert.equal(error.field, query.split('=')[0]);
      assert.equal(error.type, 'invalid_value');
      assert.equal(error.resource, 'site');
      assert.equal(typeof error.code, 'string');
      assert.equal(typeof error.message, 'string');
    });
  }
});

describe('createSite', () => {
  it('S2 creates a site and answers 201 with the Site record', async () => {
    const w = await f.world();
    const res = await w.owner.client.post('/v1/sites', { name: 'My Site', account_id: w.account.id });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, 'My Site');
    assert.deepEqual(res.body.account, { id: w.account.id });
    assert.deepEqual(res.body.installs, []);
    const got = await w.owner.client.get(`/v1/sites/${res.body.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, res.body);
  });

  it('S2 requires name and account_id: one G7 error per missing field', async () => {
    const w = await f.world();
    const res = await w.owner.client.post('/v1/sites', {});
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field).sort(), ['account_id', 'name']);
    for (const e of res.body.errors) assert.equal(e.code, 'required');
  });

  it('S2 rejects an over-long or blank name', async () => {
    const w = await f.world();
    for (const name of ['x'.repeat(101), '   ', '']) {
      const res = await w.owner.client.post('/v1/sites', { name, account_id: w.account.id });
      expectFieldError(res, 'name');
    }
  });

  it('S2 an account the caller cannot see is a 400 access_error on account_id (no 404 in the spec table)', async () => {
    const w = await f.world();
    const other = await f.account();
    const res = await w.owner.client.post('/v1/sites', { name: 'X', account_id: other.id });
    expectFieldError(res, 'account_id', 'access_error');
  });

  it('S4 sandbox and transferable are set by operators only; unknown body fields are ignored', async () => {
    const w = await f.world();
    const res = await w.owner.client.post('/v1/sites', {
      name: 'Sneaky',
      account_id: w.account.id,
      sandbox: true,
      transferable: false,
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.sandbox, false);
    assert.equal(res.body.transferable, true);
    const flagged = await t.admin.patch(`/admin/v1/sites/${res.body.id}`, {
      sandbox: true,
      transferable: false,
    });
    assert.equal(flagged.status, 200);
    const got = await w.owner.client.get(`/v1/sites/${res.body.id}`);
    assert.equal(got.body.sandbox, true);
    assert.equal(got.body.transferable, false);
  });

  it('S2 an account without sites enabled cannot hold sites', async () => {
    const acct = await f.account({ sites_enabled: false });
    const owner = await f.user([{ account_id: acct.id, roles: 'owner' }]);
    const res = await owner.client.post('/v1/sites', { name: 'X', account_id: acct.id });
    expectFieldError(res, 'account_id');
  });
});

describe('updateSite and deleteSite', () => {
  it('updates name, group_name and tags', async () => {
    const w = await f.world();
    const res = await w.owner.client.patch(`/v1/sites/${w.site.id}`, {
      name: 'Renamed',
      group_name: 'Clients',
      tags: ['a', 'b'],
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.group_name, 'Clients');
    assert.deepEqual(res.body.tags, ['a', 'b']);
    assert.equal(res.body.installs.length, 1);
  });

  it('refuses to delete a site that still holds installs (400), deletes an empty one (204)', async () => {
    const w = await f.world();
    const refused = await w.owner.client.delete(`/v1/sites/${w.site.id}`);
    assert.equal(refused.status, 400);
    assert.match(refused.body.message, /still holds 1 install/);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    const deleted = await w.owner.client.delete(`/v1/sites/${w.site.id}`);
    assert.equal(deleted.status, 204);
    assert.equal((await w.owner.client.get(`/v1/sites/${w.site.id}`)).status, 404);
  });
});
