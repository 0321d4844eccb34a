import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { domains } from '../../src/db/schema.js';
import { expectFieldError } from '../support/assertions.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, type Res } from '../support/harness.js';

const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '200', DNS_TRIES: '1' } });
const f = factories(t);

const DOMAIN_KEYS = [
  'duplicate',
  'id',
  'name',
  'network_details',
  'network_type',
  'ownership_status',
  'primary',
  'redirects_to',
  'secure_all_urls',
  'txt_verification_key',
  'txt_verification_value',
  'txt_verified_time',
];

const url = (installId: string, domainId?: string) =>
  `/v1/installs/${installId}/domains${domainId ? `/${domainId}` : ''}`;

async function installOf(w: Json) {
  return (await w.owner.client.get(`/v1/installs/${w.install.id}`)).body;
}

function fieldError(res: Res, field: string) {
  const error = expectFieldError(res, field);
  assert.equal(error.resource, 'domain');
  return error;
}

describe('listDomains and getDomain', () => {
  it('D1 lists the domains of an install in the G6 envelope, paged by limit and offset', async () => {
    const w = await f.world();
    const names = [uniqueDomain(), uniqueDomain(), uniqueDomain()];
    for (const name of names) await addDomain(w.owner.client, w.install.id, name);
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    await addDomain(w.owner.client, other.id, uniqueDomain());
    const all = await w.owner.client.get(url(w.install.id));
    assert.equal(all.status, 200);
    assert.equal(all.body.count, 3);
    assert.deepEqual(
      all.body.results.map((d: Json) => d.name),
      names,
    );
    const page = await w.owner.client.get(`${url(w.install.id)}?limit=2&offset=1`);
    assert.equal(page.body.results.length, 2);
    assert.equal(new URL(page.body.previous).searchParams.get('offset'), '0');
    assert.equal(page.body.next, null);
    assert.equal((await w.owner.client.get(`${url(w.install.id)}?limit=101`)).status, 400);
  });

  it('D1 gets one domain as the spec Domain record, with network_details values', async () => {
    const w = await f.world();
    const name = uniqueDomain();
    const created = await addDomain(w.owner.client, w.install.id, name);
    const res = await w.owner.client.get(url(w.install.id, created.id));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, created);
    assert.deepEqual(Object.keys(res.body).sort(), DOMAIN_KEYS);
    assert.equal(res.body.network_type, 'AN');
    assert.deepEqual(res.body.network_details, {
      dns_config_info: { cname: `${w.install.name}.hostplane.app`, a_records: [] },
      network_info: { status: 'PENDING', ssl: { status: 'none' } },
    });
    assert.deepEqual(res.body.redirects_to, []);
    assert.equal(res.body.duplicate, false);
    assert.equal(res.body.primary, false);
    assert.equal(res.body.secure_all_urls, false);
    assert.equal(res.body.txt_verified_time, null);
    assert.equal('txt_verified_domain' in res.body, false, 'absent until verified, never null');
  });

  it('D1 a domain of another install is 404 under this install; an unknown id is 404', async () => {
    const w = await f.world();
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const foreign = await addDomain(w.owner.client, other.id, uniqueDomain());
    assert.equal((await w.owner.client.get(url(w.install.id, foreign.id))).status, 404);
    assert.equal((await w.owner.client.get(url(w.install.id, crypto.randomUUID()))).status, 404);
  });

  it('G12 listDomains and getDomain have no Bad Request: a malformed path id is 404, a bad limit stays 400 (G5)', async () => {
    const w = await f.world();
    const malformedDomain = await w.owner.client.get(url(w.install.id, 'not-a-uuid'));
    assert.equal(malformedDomain.status, 404);
    assert.deepEqual(malformedDomain.body, { message: 'Not Found' });
    const malformedInstall = await w.owner.client.get('/v1/installs/not-a-uuid/domains');
    assert.equal(malformedInstall.status, 404);
    assert.deepEqual(malformedInstall.body, { message: 'Not Found' });
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}/domains?limit=101`)).status, 400);
  });

  it('stable IPs of the install are the a_records', async () => {
    const w = await f.world({ plan: 'premium' });
    const ips = ['203.0.113.10', '203.0.113.11'];
    assert.equal(
      (await t.admin.patch(`/admin/v1/installs/${w.install.id}`, { stable_ips: ips })).status,
      200,
    );
    const created = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    assert.deepEqual(created.network_details.dns_config_info.a_records, ips);
  });
});

describe('createDomain', () => {
  it('D7 a new domain is TXT_VERIFICATION_PENDING with its record name and an unguessable value', async () => {
    const w = await f.world();
    const name = uniqueDomain();
    const res = await w.owner.client.post(url(w.install.id), { name });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, name);
    assert.equal(res.body.ownership_status, 'TXT_VERIFICATION_PENDING');
    assert.equal(res.body.txt_verification_key, `_hostplane-challenge.${name}`);
    assert.match(res.body.txt_verification_value, /^hostplane-verification=[A-Za-z0-9_-]{43}$/);
    const second = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    assert.notEqual(second.txt_verification_value, res.body.txt_verification_value);
  });

  it('converts an IDN to punycode and lower-cases the name', async () => {
    const w = await f.world();
    const label = `Bücher${Date.now()}`;
    const res = await w.owner.client.post(url(w.install.id), { name: ` ${label}.Example.TEST. ` });
    assert.equal(res.status, 201);
    assert.match(res.body.name, /^xn--bcher\d+-.*\.example\.test$/);
    assert.equal(res.body.txt_verification_key, `_hostplane-challenge.${res.body.name}`);
  });

  const invalid: [string, string][] = [
    ['localhost', 'single_label_name'],
    ['exa mple.test', 'invalid_domain_name'],
    ['a_b.example.test', 'invalid_characters'],
    ['-a.example.test', 'invalid_characters'],
    [`${'a'.repeat(64)}.test`, 'label_too_long'],
    [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.test`, 'name_too_long'],
    ['192.0.2.1', 'invalid_domain_name'],
    ['www.*.example.test', 'invalid_wildcard'],
    ['*.test', 'invalid_wildcard'],
    ['xn--zz.test', 'invalid_domain_name'],
    ['shop.hostplane.app', 'reserved_domain'],
  ];
  for (const [name, code] of invalid) {
    it(`refuses ${name.length > 40 ? `${name.slice(0, 30)}...` : name} with 400 ${code} on field name`, async () => {
      const w = await f.world();
      const error = fieldError(await w.owner.client.post(url(w.install.id), { name }), 'name');
      assert.equal(error.type, 'invalid_value');
      assert.equal(error.code, code);
    });
  }

  it('bounds the name in the schema (256 characters is a 400)', async () => {
    const w = await f.world();
    const error = fieldError(await w.owner.client.post(url(w.install.id), { name: 'a'.repeat(256) }), 'name');
    assert.equal(error.code, 'maxLength');
  });

  it('recognises a wildcard domain; D3 a wildcard cannot be primary', async () => {
    const w = await f.world();
    const base = uniqueDomain();
    const wildcard = await addDomain(w.owner.client, w.install.id, `*.${base}`);
    assert.equal(wildcard.name, `*.${base}`);
    assert.equal(wildcard.txt_verification_key, `_hostplane-challenge.${base}`);
    const refused = await w.owner.client.post(url(w.install.id), {
      name: `*.${uniqueDomain()}`,
      primary: true,
    });
    assert.equal(fieldError(refused, 'primary').code, 'wildcard_cannot_be_primary');
  });

  it('G12 a name the install already has is a 400 value_unavailable (no Conflict)', async () => {
    const w = await f.world();
    const name = uniqueDomain();
    await addDomain(w.owner.client, w.install.id, name);
    const error = fieldError(
      await w.owner.client.post(url(w.install.id), { name: name.toUpperCase() }),
      'name',
    );
    assert.equal(error.type, 'value_unavailable');
    assert.equal(error.code, 'domain_exists');
    assert.match(error.message, /already a domain of this install/);
  });

  it('D4 primary: true makes it the primary domain and the install primary_domain follows', async () => {
    const w = await f.world();
    assert.equal((await installOf(w)).primary_domain, `${w.install.name}.hostplane.app`);
    const first = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    assert.equal(first.primary, true);
    const second = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    assert.equal((await w.owner.client.get(url(w.install.id, first.id))).body.primary, false);
    assert.equal((await installOf(w)).primary_domain, second.name);
  });

  it('D5 may redirect to a domain of the same install at creation; D3 not when primary', async () => {
    const w = await f.world();
    const target = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const source = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { redirect_to: target.id });
    assert.deepEqual(source.redirects_to, [{ id: target.id, name: target.name }]);
    const none = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { redirect_to: 'nil' });
    assert.deepEqual(none.redirects_to, []);
    const both = await w.owner.client.post(url(w.install.id), {
      name: uniqueDomain(),
      primary: true,
      redirect_to: target.id,
    });
    assert.equal(fieldError(both, 'primary').code, 'redirected_cannot_be_primary');
    const chain = await w.owner.client.post(url(w.install.id), {
      name: uniqueDomain(),
      redirect_to: source.id,
    });
    assert.equal(fieldError(chain, 'redirect_to').code, 'redirect_chain');
  });

  it('D3 a duplicate of a name verified elsewhere is allowed, flagged duplicate, and never primary', async () => {
    const a = await f.world();
    const b = await f.world();
    const name = uniqueDomain();
    const original = await addDomain(a.owner.client, a.install.id, name);
    const early = await addDomain(b.owner.client, b.install.id, name);
    assert.equal(early.duplicate, false, 'two unverified records are not duplicates yet');
    await verifyDomain(dns, a.owner.client, a.install.id, original);
    const dup = (await b.owner.client.get(url(b.install.id, early.id))).body;
    assert.equal(dup.duplicate, true);
    const c = await f.world();
    const late = await addDomain(c.owner.client, c.install.id, name);
    assert.equal(late.duplicate, true);
    const other = await f.world();
    const refused = await other.owner.client.post(url(other.install.id), { name, primary: true });
    assert.equal(fieldError(refused, 'primary').code, 'duplicate_cannot_be_primary');
    const patched = await c.owner.client.patch(url(c.install.id, late.id), { primary: true });
    assert.equal(fieldError(patched, 'primary').code, 'duplicate_cannot_be_primary');
    assert.equal((await a.owner.client.get(url(a.install.id, original.id))).body.duplicate, false);
  });
});

describe('createBulkDomains', () => {
  const bulk = (installId: string) => `/v1/installs/${installId}/domains/bulk`;

  it('adds up to 50 domains in request order (201 {domains})', async () => {
    const w = await f.world();
    const names = Array.from({ length: 50 }, () => uniqueDomain());
    const res = await w.owner.client.post(bulk(w.install.id), {
      domains: names.map((name, i) => ({ name, ...(i === 7 && { primary: true }) })),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.domains.map((d: Json) => d.name),
      names,
    );
    assert.deepEqual(Object.keys(res.body.domains[0]).sort(), DOMAIN_KEYS);
    assert.equal(res.body.domains[7].primary, true);
    assert.equal((await installOf(w)).primary_domain, names[7]);
    assert.equal((await w.owner.client.get(url(w.install.id))).body.count, 50);
  });

  it('is all or nothing: every bad item has its own error in errors[] (domains[i].field)', async () => {
    const w = await f.world();
    const existing = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const again = uniqueDomain();
    const res = await w.owner.client.post(bulk(w.install.id), {
      domains: [
        { name: uniqueDomain() },
        { name: 'not a domain' },
        { name: existing.name },
        { name: `*.${uniqueDomain()}`, primary: true },
        { name: again },
        { name: again },
        { name: uniqueDomain(), redirect_to: crypto.randomUUID() },
        { name: uniqueDomain(), primary: true },
        { name: uniqueDomain(), primary: true },
      ],
    });
    assert.equal(res.status, 400);
    assert.match(res.body.message, /^7 of 9 domains are invalid; none was added$/);
    const byField = Object.fromEntries(res.body.errors.map((e: Json) => [e.field, e.code]));
    assert.deepEqual(byField, {
      'domains[1].name': 'invalid_domain_name',
      'domains[2].name': 'domain_exists',
      'domains[3].primary': 'wildcard_cannot_be_primary',
      'domains[5].name': 'domain_exists',
      'domains[6].redirect_to': 'redirect_target_not_found',
      'domains[7].primary': 'multiple_primary',
      'domains[8].primary': 'multiple_primary',
    });
    assert.equal((await w.owner.client.get(url(w.install.id))).body.count, 1);
  });

  it('schema errors name the item too; more than 50 or none is a 400', async () => {
    const w = await f.world();
    const long = await w.owner.client.post(bulk(w.install.id), {
      domains: [{ name: uniqueDomain() }, { name: 'x'.repeat(300) }],
    });
    assert.equal(fieldError(long, 'domains[1].name').code, 'maxLength');
    const tooMany = await w.owner.client.post(bulk(w.install.id), {
      domains: Array.from({ length: 51 }, () => ({ name: uniqueDomain() })),
    });
    assert.equal(fieldError(tooMany, 'domains').code, 'maxItems');
    assert.equal(
      fieldError(await w.owner.client.post(bulk(w.install.id), { domains: [] }), 'domains').code,
      'minItems',
    );
  });
});

describe('updateDomain', () => {
  it('D2 takes secure_all_urls; an empty body changes nothing', async () => {
    const w = await f.world();
    const d = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const res = await w.owner.client.patch(url(w.install.id, d.id), { secure_all_urls: true });
    assert.equal(res.status, 200);
    assert.equal(res.body.secure_all_urls, true);
    const same = await w.owner.client.patch(url(w.install.id, d.id), {});
    assert.deepEqual(same.body, res.body);
  });

  it('D6 an unverified domain can be updated; it stays pending and its network status PENDING', async () => {
    const w = await f.world();
    const d = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const res = await w.owner.client.patch(url(w.install.id, d.id), { primary: true, secure_all_urls: true });
    assert.equal(res.status, 200);
    assert.equal(res.body.primary, true);
    assert.equal(res.body.ownership_status, 'TXT_VERIFICATION_PENDING');
    assert.equal(res.body.network_details.network_info.status, 'PENDING');
    assert.equal(res.body.txt_verification_value, d.txt_verification_value);
  });

  it('D4 making a domain primary unsets the former primary; primary false restores the cname', async () => {
    const w = await f.world();
    const a = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    const b = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const res = await w.owner.client.patch(url(w.install.id, b.id), { primary: true });
    assert.equal(res.body.primary, true);
    assert.equal((await w.owner.client.get(url(w.install.id, a.id))).body.primary, false);
    assert.equal((await installOf(w)).primary_domain, b.name);
    const off = await w.owner.client.patch(url(w.install.id, b.id), { primary: false });
    assert.equal(off.body.primary, false);
    assert.equal((await installOf(w)).primary_domain, `${w.install.name}.hostplane.app`);
  });

  it('D4 concurrent switches leave exactly one primary, and primary_domain names it', async () => {
    const w = await f.world();
    const ds = [];
    for (let i = 0; i < 6; i++) ds.push(await addDomain(w.owner.client, w.install.id, uniqueDomain()));
    const results = await Promise.all(
      ds.map((d) => w.owner.client.patch(url(w.install.id, d.id), { primary: true })),
    );
    for (const r of results) assert.equal(r.status, 200);
    const list = (await w.owner.client.get(url(w.install.id))).body.results;
    const primaries = list.filter((d: Json) => d.primary);
    assert.equal(primaries.length, 1);
    assert.equal((await installOf(w)).primary_domain, primaries[0].name);
  });

  it('D3 a wildcard or redirected domain cannot be made primary (400 naming why)', async () => {
    const w = await f.world();
    const wildcard = await addDomain(w.owner.client, w.install.id, `*.${uniqueDomain()}`);
    const refusedWildcard = await w.owner.client.patch(url(w.install.id, wildcard.id), { primary: true });
    assert.equal(fieldError(refusedWildcard, 'primary').code, 'wildcard_cannot_be_primary');
    const target = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const source = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { redirect_to: target.id });
    const refused = await w.owner.client.patch(url(w.install.id, source.id), { primary: true });
    assert.equal(fieldError(refused, 'primary').code, 'redirected_cannot_be_primary');
    assert.match(refused.body.message, /redirects and cannot be primary/);
    const together = await w.owner.client.patch(url(w.install.id, target.id), {
      primary: true,
      redirect_to: 'nil',
    });
    assert.equal(together.status, 200);
  });

  it('D5 redirect_to sets redirects_to; the literal nil removes it', async () => {
    const w = await f.world();
    const target = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const source = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const res = await w.owner.client.patch(url(w.install.id, source.id), { redirect_to: target.id });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.redirects_to, [{ id: target.id, name: target.name }]);
    const cleared = await w.owner.client.patch(url(w.install.id, source.id), { redirect_to: 'nil' });
    assert.deepEqual(cleared.body.redirects_to, []);
    const bad = await w.owner.client.patch(url(w.install.id, source.id), { redirect_to: 'null' });
    assert.equal(fieldError(bad, 'redirect_to').type, 'invalid_value');
  });

  it('D5 refuses a target outside the install, itself, chains and loops, and a redirecting primary', async () => {
    const w = await f.world();
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const foreign = await addDomain(w.owner.client, other.id, uniqueDomain());
    const a = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const b = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const c = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const patch = (id: string, body: Json) => w.owner.client.patch(url(w.install.id, id), body);
    assert.equal(
      fieldError(await patch(a.id, { redirect_to: foreign.id }), 'redirect_to').code,
      'redirect_target_not_found',
    );
    assert.equal(fieldError(await patch(a.id, { redirect_to: a.id }), 'redirect_to').code, 'redirect_loop');
    assert.equal((await patch(a.id, { redirect_to: b.id })).status, 200);
    const loop = await patch(b.id, { redirect_to: a.id });
    assert.equal(fieldError(loop, 'redirect_to').code, 'redirect_chain');
    assert.match(loop.body.message, /itself redirects to .*\(no redirect chains or loops\)/);
    assert.equal(fieldError(await patch(c.id, { redirect_to: a.id }), 'redirect_to').code, 'redirect_chain');
    assert.equal((await patch(c.id, { primary: true })).status, 200);
    const primaryRedirect = await patch(c.id, { redirect_to: b.id });
    assert.equal(fieldError(primaryRedirect, 'redirect_to').code, 'primary_cannot_redirect');
    const wildcard = await addDomain(w.owner.client, w.install.id, `*.${uniqueDomain()}`);
    assert.equal(
      fieldError(await patch(b.id, { redirect_to: wildcard.id }), 'redirect_to').code,
      'redirect_to_wildcard',
    );
  });

  it('answers 404 for an unknown domain', async () => {
    const w = await f.world();
    assert.equal((await w.owner.client.patch(url(w.install.id, crypto.randomUUID()), {})).status, 404);
  });
});

describe('deleteDomain', () => {
  it('deletes a domain (204), after which it is 404', async () => {
    const w = await f.world();
    const d = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    assert.equal((await w.owner.client.delete(url(w.install.id, d.id))).status, 204);
    assert.equal((await w.owner.client.get(url(w.install.id, d.id))).status, 404);
    assert.equal((await w.owner.client.delete(url(w.install.id, d.id))).status, 404);
  });

  it('refuses the primary domain and a redirect target with a 400 naming why', async () => {
    const w = await f.world();
    const primary = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    const refused = await w.owner.client.delete(url(w.install.id, primary.id));
    assert.equal(fieldError(refused, 'domain_id').code, 'primary_domain');
    assert.match(refused.body.message, /primary domain/);
    const target = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const source = await addDomain(w.owner.client, w.install.id, uniqueDomain(), { redirect_to: target.id });
    const refusedTarget = await w.owner.client.delete(url(w.install.id, target.id));
    assert.equal(fieldError(refusedTarget, 'domain_id').code, 'redirect_target');
    assert.match(
      refusedTarget.body.message,
      new RegExp(`redirect target of ${source.name.replaceAll('.', '\\.')}`),
    );
    assert.equal((await w.owner.client.delete(url(w.install.id, source.id))).status, 204);
    assert.equal((await w.owner.client.delete(url(w.install.id, target.id))).status, 204);
  });

  it('deleting the install deletes its domains (cascade)', async () => {
    const w = await f.world();
    await addDomain(w.owner.client, w.install.id, uniqueDomain(), { primary: true });
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    const left = await t.database.db.select().from(domains).where(eq(domains.install_id, w.install.id));
    assert.equal(left.length, 0);
  });
});

describe('authorization of the domain routes (G2, G4, A2)', () => {
  const routes = (installId: string, domainId: string): [string, string, Json?][] => [
    ['GET', url(installId)],
    ['POST', url(installId), { name: uniqueDomain() }],
    ['POST', `${url(installId)}/bulk`, { domains: [{ name: uniqueDomain() }] }],
    ['GET', url(installId, domainId)],
    ['PATCH', url(installId, domainId), { secure_all_urls: true }],
    ['DELETE', url(installId, domainId)],
  ];

  it('401 without credentials, 404 for a foreign account and for a partial user outside its installs', async () => {
    const w = await f.world();
    const d = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const stranger = await f.world();
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const partial = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [other.id] }]);
    for (const [method, path, body] of routes(w.install.id, d.id)) {
      const anon = await t.anonymous.request(method as 'GET', path, body);
      assert.equal(anon.status, 401, `${method} ${path}`);
      assert.equal(anon.body.message, 'Bad Credentials');
      assert.equal(
        (await stranger.owner.client.request(method as 'GET', path, body)).status,
        404,
        `${method} ${path}`,
      );
      assert.equal(
        (await partial.client.request(method as 'GET', path, body)).status,
        404,
        `${method} ${path}`,
      );
    }
  });

  it('A2 every role, partial included, may read and act on the domains of its installs (no 403)', async () => {
    const w = await f.world();
    for (const roles of ['full', 'full,billing', 'partial', 'partial,billing'] as const) {
      const scope = roles.startsWith('partial') ? { install_ids: [w.install.id] } : {};
      const member = await f.user([{ account_id: w.account.id, roles, ...scope }]);
      const d = await addDomain(w.owner.client, w.install.id, uniqueDomain());
      const expected = [200, 201, 201, 200, 200, 204];
      const results = [];
      for (const [method, path, body] of routes(w.install.id, d.id)) {
        results.push((await member.client.request(method as 'GET', path, body)).status);
      }
      assert.deepEqual(results, expected, roles);
    }
  });
});
