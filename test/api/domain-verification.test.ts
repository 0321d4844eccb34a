import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { dueJobs } from '../../src/db/schema.js';
import { expectFieldError } from '../support/assertions.js';
import { characterStrings, startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';

// A real DNS server on a local port; the app's resolver points at it through DNS_SERVERS, with a
// short timeout so the timeout case stays fast.
const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address, DNS_TIMEOUT_MS: '250', DNS_TRIES: '1' } });
const f = factories(t);
// Decision 249's background checks move the clock by days: an app (and a DNS server) of their own.
const bgDns = await startDnsServer();
const bg = await buildTestApp({ env: { DNS_SERVERS: bgDns.address, DNS_TIMEOUT_MS: '250', DNS_TRIES: '1' } });
const fb = factories(bg);

const domainUrl = (installId: string, domainId: string) => `/v1/installs/${installId}/domains/${domainId}`;
const verification = (installId: string, domainId: string) =>
  `${domainUrl(installId, domainId)}/verification`;

async function pendingDomain(name = uniqueDomain()) {
  const w = await f.world();
  const domain = await addDomain(w.owner.client, w.install.id, name);
  const verify = () => w.owner.client.post(verification(w.install.id, domain.id));
  const get = async () => (await w.owner.client.get(domainUrl(w.install.id, domain.id))).body;
  return { w, domain, verify, get };
}

function assertPending(body: Json, domain: Json) {
  assert.equal(body.ownership_status, 'TXT_VERIFICATION_PENDING');
  assert.equal(body.txt_verification_key, domain.txt_verification_key);
  assert.equal(body.txt_verification_value, domain.txt_verification_value);
  assert.equal(body.txt_verified_time, null);
  assert.equal('txt_verified_domain' in body, false, 'absent until verified (not x-nullable)');
  assert.equal(body.network_details.network_info.status, 'PENDING');
}

describe('verifyDomainTxtRecord', () => {
  it('D7 a correct TXT record verifies: TXT_VERIFIED, time and domain set, key and value null', async () => {
    const { w, domain, verify } = await pendingDomain();
    dns.answer(domain.txt_verification_key, { txt: ['v=spf1 -all', domain.txt_verification_value] });
    const res = await verify();
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.id, domain.id);
    assert.equal(res.body.ownership_status, 'TXT_VERIFIED');
    assert.equal(res.body.txt_verified_time, t.clock.now().toISOString());
    assert.equal(res.body.txt_verified_domain, domain.name);
    assert.equal(res.body.txt_verification_key, null);
    assert.equal(res.body.txt_verification_value, null);
    assert.equal(res.body.network_details.network_info.status, 'ACTIVE');
    assert.deepEqual((await w.owner.client.get(domainUrl(w.install.id, domain.id))).body, res.body);
  });

  it('D7 verifying a verified domain again answers it unchanged without a DNS query', async () => {
    const { w, domain, verify } = await pendingDomain();
    const verified = await verifyDomain(dns, w.owner.client, w.install.id, domain);
    const before = dns.queries.length;
    t.clock.advance(60_000);
    const again = await verify();
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, verified);
    assert.equal(dns.queries.length, before);
  });

  it('D7 a wrong value leaves the domain pending (200 with the domain)', async () => {
    const { domain, verify, get } = await pendingDomain();
    dns.answer(domain.txt_verification_key, { txt: ['hostplane-verification=not-the-value'] });
    const res = await verify();
    assert.equal(res.status, 200);
    assertPending(res.body, domain);
    assertPending(await get(), domain);
  });

  it('D7 a missing record (NXDOMAIN) or a name without TXT records (NODATA) leaves it pending', async () => {
    const { domain, verify } = await pendingDomain();
    const missing = await verify();
    assert.equal(missing.status, 200);
    assertPending(missing.body, domain);
    dns.answer(domain.txt_verification_key, { txt: [] });
    const empty = await verify();
    assert.equal(empty.status, 200);
    assertPending(empty.body, domain);
    assert.ok(dns.queries.includes(domain.txt_verification_key));
  });

  it('D7 the right value on another name (the apex, another domain) does not verify', async () => {
    const { domain, verify } = await pendingDomain();
    dns.answer(domain.name, { txt: [domain.txt_verification_value] });
    dns.answer(`_hostplane-challenge.${uniqueDomain()}`, { txt: [domain.txt_verification_value] });
    dns.answer(`www.${domain.txt_verification_key}`, { txt: [domain.txt_verification_value] });
    const res = await verify();
    assert.equal(res.status, 200);
    assertPending(res.body, domain);
  });

  it('D7 a record longer than 255 bytes, split into several strings, verifies once joined', async () => {
    const { domain, verify } = await pendingDomain();
    // The value straddles the first 255-byte boundary, so only the joined text holds it.
    const text = `${'x'.repeat(220)} ${domain.txt_verification_value} ${'y'.repeat(200)}`;
    const strings = characterStrings(text);
    assert.ok(strings.length >= 2 && !strings.some((s) => s.includes(domain.txt_verification_value)));
    dns.answer(domain.txt_verification_key, { txt: [strings] });
    const res = await verify();
    assert.equal(res.status, 200);
    assert.equal(res.body.ownership_status, 'TXT_VERIFIED');
  });

  it('D7 the value split over two separate records does not verify (strings join within one record only)', async () => {
    const { domain, verify } = await pendingDomain();
    const value: string = domain.txt_verification_value;
    dns.answer(domain.txt_verification_key, { txt: [value.slice(0, 30), value.slice(30)] });
    assertPending((await verify()).body, domain);
  });

  it('D7 a wildcard is verified on its base name; an IDN on its punycode name', async () => {
    const base = uniqueDomain();
    const wildcard = await pendingDomain(`*.${base}`);
    assert.equal(wildcard.domain.txt_verification_key, `_hostplane-challenge.${base}`);
    dns.answer(`_hostplane-challenge.${base}`, { txt: [wildcard.domain.txt_verification_value] });
    const res = await wildcard.verify();
    assert.equal(res.body.ownership_status, 'TXT_VERIFIED');
    assert.equal(res.body.txt_verified_domain, base);
    const idn = await pendingDomain(`müller${Date.now()}.example.test`);
    assert.match(idn.domain.txt_verification_key, /^_hostplane-challenge\.xn--mller\d+-.+\.example\.test$/);
    await verifyDomain(dns, idn.w.owner.client, idn.w.install.id, idn.domain);
  });

  it('D7 a DNS timeout is a 503 with a message and leaves the domain pending, unchanged', async () => {
    const { domain, verify, get } = await pendingDomain();
    dns.answer(domain.txt_verification_key, { hang: true });
    const started = Date.now();
    const res = await verify();
    assert.equal(res.status, 503);
    assert.deepEqual(Object.keys(res.body), ['message']);
    assert.match(res.body.message, /ETIMEOUT/);
    assert.match(res.body.message, /unchanged/);
    assert.ok(Date.now() - started < 5000);
    assertPending(await get(), domain);
  });

  for (const rcode of ['SERVFAIL', 'REFUSED'] as const) {
    it(`D7 a ${rcode} answer is a 503, never a false "not found", and changes nothing`, async () => {
      const { domain, verify, get } = await pendingDomain();
      dns.answer(domain.txt_verification_key, { rcode });
      const res = await verify();
      assert.equal(res.status, 503);
      assert.match(res.body.message, new RegExp(`E${rcode}`));
      assertPending(await get(), domain);
    });
  }

  it('D7 an unreadable answer (one character-string over 255 bytes) is a 502 and changes nothing', async () => {
    const { domain, verify, get } = await pendingDomain();
    dns.answer(domain.txt_verification_key, { txt: [`${domain.txt_verification_value}${'z'.repeat(300)}`] });
    const res = await verify();
    assert.equal(res.status, 502);
    assert.match(res.body.message, /EBADRESP/);
    assertPending(await get(), domain);
  });

  it('D3 once verified on one install, the name elsewhere is a duplicate: not verifiable, demoted from primary', async () => {
    const name = uniqueDomain();
    const a = await pendingDomain(name);
    const b = await f.world();
    const onB = await addDomain(b.owner.client, b.install.id, name, { primary: true });
    assert.equal(onB.duplicate, false);
    assert.equal((await b.owner.client.get(`/v1/installs/${b.install.id}`)).body.primary_domain, name);
    await verifyDomain(dns, a.w.owner.client, a.w.install.id, a.domain);
    const after = (await b.owner.client.get(domainUrl(b.install.id, onB.id))).body;
    assert.equal(after.duplicate, true);
    assert.equal(after.primary, false);
    const install = (await b.owner.client.get(`/v1/installs/${b.install.id}`)).body;
    assert.equal(install.primary_domain, `${b.install.name}.hostplane.app`);
    dns.answer(onB.txt_verification_key, { txt: [onB.txt_verification_value] });
    const refused = await b.owner.client.post(verification(b.install.id, onB.id));
    expectFieldError(refused, 'name', 'value_unavailable', 'domain_verified_elsewhere');
    assert.equal(
      (await b.owner.client.get(domainUrl(b.install.id, onB.id))).body.ownership_status,
      'TXT_VERIFICATION_PENDING',
    );
  });

  it('answers 404 for an unknown domain', async () => {
    const w = await f.world();
    assert.equal((await w.owner.client.post(verification(w.install.id, crypto.randomUUID()))).status, 404);
  });
});

describe('authorization of verifyDomainTxtRecord (G2, G4, A2)', () => {
  it('401 without credentials, 404 for a foreign account and for a partial user outside its installs', async () => {
    const { w, domain } = await pendingDomain();
    const path = verification(w.install.id, domain.id);
    const anon = await t.anonymous.post(path);
    assert.equal(anon.status, 401);
    assert.equal(anon.body.message, 'Bad Credentials');
    const stranger = await f.world();
    assert.equal((await stranger.owner.client.post(path)).status, 404);
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const outside = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [other.id] }]);
    assert.equal((await outside.client.post(path)).status, 404);
  });

  it('A2 a partial user may verify a domain of its install', async () => {
    const { w, domain } = await pendingDomain();
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    await verifyDomain(dns, partial.client, w.install.id, domain);
  });
});

describe('D7 in the background (decision 249)', () => {
  const lookups = (name: string) =>
    bgDns.queries.filter((q) => q.toLowerCase() === name.toLowerCase()).length;
  /** The domain's next background check (its due row), or null when none is scheduled. */
  const nextCheck = async (domainId: string) => {
    const [row] = await bg.database.db
      .select({ run_at: dueJobs.run_at })
      .from(dueJobs)
      .where(eq(dueJobs.key, `verify_domain:${domainId}`));
    return row ? row.run_at.getTime() : null;
  };
  async function pending() {
    const w = await fb.world();
    const domain = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const get = async () => (await w.owner.client.get(domainUrl(w.install.id, domain.id))).body;
    return { w, domain, get };
  }

  it('D7 (decision 249) a pending domain is verified on its own once its TXT record is in place: checked a minute after it is added, no failure event meanwhile, then verified and served as by the API', async () => {
    const { w, domain, get } = await pending();
    const key = domain.txt_verification_key as string;
    assert.equal(await nextCheck(domain.id), bg.clock.now().getTime() + 60_000, 'first check a minute later');
    bg.clock.advance(30_000);
    await bg.runJobs();
    assert.equal(lookups(key), 0, 'not before it is due');
    bg.clock.advance(31_000);
    await bg.runJobs();
    assert.equal(lookups(key), 1);
    assertPending(await get(), domain);
    const failed = await w.owner.client.get(
      `/v1/accounts/${w.account.id}/events?type=domain.verification_failed`,
    );
    assert.equal(failed.status, 200, JSON.stringify(failed.body));
    assert.equal(
      failed.body.results.length,
      0,
      'a background check the customer did not ask for is no event',
    );
    const next = await nextCheck(domain.id);
    assert.ok(next !== null && next > bg.clock.now().getTime(), 'checked again later');

    bgDns.answer(key, { txt: [domain.txt_verification_value] });
    bg.clock.advance((next as number) - bg.clock.now().getTime());
    await bg.runJobs();
    const verified = await get();
    assert.equal(verified.ownership_status, 'TXT_VERIFIED', JSON.stringify(verified));
    assert.equal(verified.txt_verified_time, bg.clock.now().toISOString());
    assert.equal(verified.txt_verified_domain, domain.name);
    assert.equal(verified.txt_verification_key, null);
    assert.equal(verified.network_details.network_info.status, 'ACTIVE', 'D6: served once verified');
    const events = await w.owner.client.get(`/v1/accounts/${w.account.id}/events?type=domain.verified`);
    assert.deepEqual(
      events.body.results.map((e: Json) => e.data.domain_id),
      [domain.id],
    );
    assert.equal(await nextCheck(domain.id), null, 'no check after it is verified');
    bg.clock.advance(24 * 3600_000);
    await bg.runJobs();
    assert.equal(lookups(key), 2, 'a verified domain is not looked up again');
  });

  it("D7 (decision 249) the checks back off (a quarter of the domain's age, one minute to six hours), survive DNS failures, and end a week after the domain was added", async () => {
    const { domain, get } = await pending();
    const key = domain.txt_verification_key as string;
    const added = bg.clock.now().getTime();
    // A failing DNS server for the first day (SERVFAIL: a 503 for the API), then no record at all.
    bgDns.answer(key, { rcode: 'SERVFAIL' });
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const at = await nextCheck(domain.id);
      if (at === null) break;
      times.push(at);
      bg.clock.advance(at - bg.clock.now().getTime());
      if (at - added > 24 * 3600_000) bgDns.answer(key, { txt: [] });
      await bg.runJobs();
    }
    assert.equal(lookups(key), times.length, 'one lookup per check');
    assert.ok(times.length >= 30 && times.length <= 60, `${times.length} checks in the week`);
    assert.equal(times[0], added + 60_000);
    const gaps = times.slice(1).map((at, i) => at - (times[i] as number));
    for (const [i, gap] of gaps.entries()) {
      assert.ok(gap >= 60_000 && gap <= 6 * 3600_000, `gap ${i}: ${gap} ms`);
      if (i > 0) assert.ok(gap >= (gaps[i - 1] as number), `gaps never shrink: ${gaps.join(', ')}`);
    }
    assert.ok((times.at(-1) as number) < added + 7 * 24 * 3600_000, 'the last check inside the week');
    assert.ok((times.at(-1) as number) > added + 6 * 24 * 3600_000, 'checks go on through the week');
    assertPending(await get(), domain);
    // After the week only the API checks; it still verifies.
    bgDns.answer(key, { txt: [domain.txt_verification_value] });
    bg.clock.advance(7 * 24 * 3600_000);
    await bg.runJobs();
    assert.equal((await get()).ownership_status, 'TXT_VERIFICATION_PENDING');
  });

  it('D7 (decision 249) a domain deleted, or verified through the API, ends its background checks', async () => {
    const deleted = await pending();
    const res = await deleted.w.owner.client.delete(domainUrl(deleted.w.install.id, deleted.domain.id));
    assert.equal(res.status, 204, JSON.stringify(res.body));
    assert.equal(await nextCheck(deleted.domain.id), null, 'its check dropped with it');

    const viaApi = await pending();
    await verifyDomain(bgDns, viaApi.w.owner.client, viaApi.w.install.id, viaApi.domain);
    const key = viaApi.domain.txt_verification_key as string;
    const before = lookups(key);
    bg.clock.advance(61_000);
    await bg.runJobs();
    assert.equal(lookups(key), before, 'the due check finds it verified without a lookup');
    assert.equal(await nextCheck(viaApi.domain.id), null);
  });
});
