import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { certificates } from '../../src/db/schema.js';
import { createSecretBox } from '../../src/secrets.js';
import { addDomain, uniqueDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { b64, createPki, type Issued } from '../support/pki.js';

const t = await buildTestApp();
const f = factories(t);
// CA -> intermediate -> leaves, made with the openssl CLI around the test clock's "now".
const pki = createPki(t.clock.now());
const DAY = 86_400_000;

const importUrl = (installId: string) => `/v1/installs/${installId}/ssl_certificates/third_party`;
const listUrl = (installId: string) => `/v1/installs/${installId}/ssl_certificates`;
const domainCertUrl = (installId: string, domainId: string) =>
  `/v1/installs/${installId}/domains/${domainId}/ssl_certificate`;

const chainOf = (...certs: Issued[]) => certs.map((c) => c.certPem).join('');
const body = (certificate: string, privateKey: string) => ({
  certificate: b64(certificate),
  private_key: b64(privateKey),
});

/** An install with one domain, and a leaf for it signed by the intermediate. */
async function setup() {
  const w = await f.world();
  const name = uniqueDomain('c');
  const domain = await addDomain(w.owner.client, w.install.id, name);
  const leaf = pki.leaf({ names: [name] });
  const good = body(chainOf(leaf, pki.intermediate, pki.root), leaf.keyPem);
  const post = (payload: Json) => w.owner.client.post(importUrl(w.install.id), payload);
  return { w, name, domain, leaf, good, post };
}

function l2Error(res: Json) {
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.equal(res.body.errors.length, 1, JSON.stringify(res.body));
  const [error] = res.body.errors;
  assert.equal(error.resource, 'ssl_certificate');
  assert.equal(error.type, 'invalid_value');
  assert.equal(res.body.message, error.message);
  return error;
}

describe('importThirdPartySSLCertificate', () => {
  it('L2 a valid chain and key answer 200 with the details: id, domains, issuer, serial, fingerprint, dates, never the key', async () => {
    const { w, name, leaf, good, post } = await setup();
    const res = await post(good);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const x509 = new X509Certificate(leaf.certPem);
    assert.deepEqual(Object.keys(res.body).sort(), [
      'approved_time',
      'auto_renew',
      'cert_source',
      'certificate',
      'common_name',
      'created_at',
      'domains',
      'expires_time',
      'fingerprint',
      'install_id',
      'issuer',
      'not_after',
      'not_before',
      'serial',
      'serial_number',
      'status',
      'subject',
      'uuid',
      'wildcard',
    ]);
    assert.equal(res.body.cert_source, 'THIRD_PARTY');
    assert.equal(res.body.status, 'ENABLED');
    assert.equal(res.body.common_name, name);
    assert.equal(res.body.wildcard, false);
    assert.equal(res.body.serial_number, res.body.serial);
    assert.equal(res.body.expires_time, res.body.not_after);
    assert.equal(res.body.install_id, w.install.id);
    assert.deepEqual(res.body.domains, [name]);
    assert.equal(res.body.issuer, 'CN=Hostplane Test Intermediate CA');
    assert.equal(res.body.subject, `CN=${name}`);
    assert.equal(res.body.serial, x509.serialNumber.toUpperCase());
    assert.equal(res.body.fingerprint, x509.fingerprint256);
    assert.equal(res.body.not_before, new Date(x509.validFrom).toISOString());
    assert.equal(res.body.not_after, new Date(x509.validTo).toISOString());
    const stored = Buffer.from(res.body.certificate, 'base64').toString('utf8');
    assert.equal(stored.match(/BEGIN CERTIFICATE/g)?.length, 3);
    assert.ok(!JSON.stringify(res.body).includes('PRIVATE'));
    assert.ok(!JSON.stringify(res.body).includes(good.private_key));
  });

  it('L2 the database row holds no plaintext key: only an AES-256-GCM sealed value that opens with the secret key', async () => {
    const { good, leaf, post } = await setup();
    const res = await post(good);
    assert.equal(res.status, 200);
    const [row] = await t.database.db.select().from(certificates).where(eq(certificates.id, res.body.uuid));
    assert.ok(row);
    const whole = JSON.stringify(row);
    assert.ok(!whole.includes('PRIVATE KEY'));
    assert.ok(!whole.includes(good.private_key));
    const pemBody = leaf.keyPem.split('\n').slice(1, 3).join('');
    assert.ok(!whole.includes(pemBody.slice(0, 40)));
    const der = createPrivateKey(leaf.keyPem).export({ type: 'pkcs8', format: 'der' });
    assert.ok(!whole.includes(der.toString('base64').slice(0, 40)));
    assert.match(row.private_key_sealed, /^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const opened = createSecretBox(SECRET_KEY).open(row.private_key_sealed, row.id);
    assert.deepEqual(opened, der);
    assert.throws(() => createSecretBox(`${SECRET_KEY}-other`).open(row.private_key_sealed, row.id));
  });

  it('L1 certificate and private_key are required', async () => {
    const { post } = await setup();
    const res = await post({});
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors.map((e: Json) => e.field).sort(), ['certificate', 'private_key']);
    for (const e of res.body.errors) assert.equal(e.code, 'required');
  });

  it('L1 each field must be base64 (raw PEM is refused with a hint)', async () => {
    const { good, leaf, post } = await setup();
    const notBase64 = l2Error(await post({ ...good, certificate: 'not base64!' }));
    assert.equal(notBase64.field, 'certificate');
    assert.equal(notBase64.code, 'invalid_base64');
    const rawPem = l2Error(await post({ ...good, private_key: leaf.keyPem }));
    assert.equal(rawPem.field, 'private_key');
    assert.equal(rawPem.code, 'invalid_base64');
    assert.match(rawPem.message, /encode the PEM text with base64/);
  });

  it('L2 every failure gives its own field error with a distinct code', async () => {
    const { w, name, leaf, good, post } = await setup();
    const expiredLeaf = pki.leaf({
      names: [name],
      notBefore: new Date(t.clock.now().getTime() - 30 * DAY),
      notAfter: new Date(t.clock.now().getTime() - DAY),
    });
    const futureLeaf = pki.leaf({
      names: [name],
      notBefore: new Date(t.clock.now().getTime() + DAY),
      notAfter: new Date(t.clock.now().getTime() + 30 * DAY),
    });
    const otherLeaf = pki.leaf({ names: [uniqueDomain('other')] });
    const expiredCa = pki.intermediateCa(
      new Date(t.clock.now().getTime() - 60 * DAY),
      new Date(t.clock.now().getTime() - DAY),
    );
    const underExpiredCa = pki.leaf({ names: [name], issuer: expiredCa });
    const nonCa = pki.nonCa();
    const underNonCa = pki.leaf({ names: [name], issuer: nonCa });
    const selfSigned = pki.selfSigned([name]);
    const encryptedKey = createPrivateKey(leaf.keyPem).export({
      type: 'pkcs8',
      format: 'pem',
      cipher: 'aes-256-cbc',
      passphrase: 'secret',
    }) as string;
    const garbledCert = leaf.certPem.replace(/\n[A-Za-z0-9+/]{20}/, '\nAAAAAAAAAAAAAAAAAAAA');
    const chain = chainOf(leaf, pki.intermediate, pki.root);
    const cases: [string, Json, 'certificate' | 'private_key', string, RegExp?][] = [
      ['not base64', { ...good, certificate: '%%%' }, 'certificate', 'invalid_base64'],
      ['no PEM block', body('hello', leaf.keyPem), 'certificate', 'no_certificate'],
      [
        'a block that does not parse',
        body(chainOf({ ...leaf, certPem: garbledCert }), leaf.keyPem),
        'certificate',
        'malformed_certificate',
      ],
      [
        'a key in the certificate field',
        body(`${chain}${leaf.keyPem}`, leaf.keyPem),
        'certificate',
        'unexpected_pem_block',
        /send the key in private_key/,
      ],
      [
        'more than 10 certificates',
        body(chainOf(...Array.from({ length: 11 }, () => pki.root)), leaf.keyPem),
        'certificate',
        'chain_too_long',
      ],
      [
        'intermediate first',
        body(chainOf(pki.intermediate, leaf, pki.root), leaf.keyPem),
        'certificate',
        'not_end_entity',
      ],
      [
        'missing intermediate (leaf, root)',
        body(chainOf(leaf, pki.root), leaf.keyPem),
        'certificate',
        'chain_broken',
      ],
      [
        'reversed intermediates',
        body(chainOf(leaf, pki.root, pki.intermediate), leaf.keyPem),
        'certificate',
        'chain_broken',
      ],
      [
        'issued by a non-CA certificate',
        body(chainOf(underNonCa, nonCa, pki.intermediate, pki.root), underNonCa.keyPem),
        'certificate',
        'issuer_not_ca',
      ],
      [
        'chain ending without its issuer',
        body(chainOf(leaf, pki.intermediate), leaf.keyPem),
        'certificate',
        'chain_incomplete',
        /missing intermediate/,
      ],
      ['self-signed', body(selfSigned.certPem, selfSigned.keyPem), 'certificate', 'self_signed'],
      [
        'expired leaf',
        body(chainOf(expiredLeaf, pki.intermediate, pki.root), expiredLeaf.keyPem),
        'certificate',
        'certificate_expired',
        /^The certificate expired/,
      ],
      [
        'expired intermediate',
        body(chainOf(underExpiredCa, expiredCa, pki.root), underExpiredCa.keyPem),
        'certificate',
        'certificate_expired',
        /Chain certificate 2/,
      ],
      [
        'not yet valid',
        body(chainOf(futureLeaf, pki.intermediate, pki.root), futureLeaf.keyPem),
        'certificate',
        'certificate_not_yet_valid',
      ],
      [
        'a leaf for another name',
        body(chainOf(otherLeaf, pki.intermediate, pki.root), otherLeaf.keyPem),
        'certificate',
        'no_matching_domain',
        /covers none of the install's domains/,
      ],
      ['key not base64', { ...good, private_key: '***' }, 'private_key', 'invalid_base64'],
      ['no key block', body(chain, 'not a key'), 'private_key', 'malformed_private_key'],
      [
        'a key that does not parse',
        body(chain, '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n'),
        'private_key',
        'malformed_private_key',
      ],
      ['an encrypted key', body(chain, encryptedKey), 'private_key', 'encrypted_private_key'],
      ['a mismatched key', body(chain, pki.newKey()), 'private_key', 'key_mismatch'],
    ];
    const codes = new Set<string>();
    for (const [label, payload, field, code, message] of cases) {
      const error = l2Error(await post(payload));
      assert.equal(error.field, field, label);
      assert.equal(error.code, code, `${label}: ${error.message}`);
      if (message) assert.match(error.message, message, label);
      codes.add(code);
    }
    assert.equal(codes.size, new Set(cases.map((c) => c[3])).size);
    assert.deepEqual(
      (await w.owner.client.get(listUrl(w.install.id))).body.certificates,
      [],
      'nothing was stored',
    );
  });

  it('L2 validity follows the injected clock: the same certificate is refused once the clock passes not_after', async () => {
    const { good, post } = await setup();
    const start = t.clock.now();
    try {
      t.clock.advance(120 * DAY);
      const error = l2Error(await post(good));
      assert.equal(error.code, 'certificate_expired');
    } finally {
      t.clock.set(start);
    }
    assert.equal((await post(good)).status, 200);
  });

  it('L2 an install without domains: no_matching_domain naming why', async () => {
    const w = await f.world();
    const leaf = pki.leaf({ names: [uniqueDomain()] });
    const res = await w.owner.client.post(
      importUrl(w.install.id),
      body(chainOf(leaf, pki.intermediate, pki.root), leaf.keyPem),
    );
    assert.match(l2Error(res).message, /has no domains yet/);
  });

  it('L2 coverage is wildcard-aware: *.name covers one label below, a wildcard domain needs the wildcard SAN', async () => {
    const w = await f.world();
    const base = uniqueDomain('w');
    const www = await addDomain(w.owner.client, w.install.id, `www.${base}`);
    await addDomain(w.owner.client, w.install.id, base);
    await addDomain(w.owner.client, w.install.id, `a.b.${base}`);
    await addDomain(w.owner.client, w.install.id, `*.${base}`);
    const leaf = pki.leaf({ names: [`*.${base}`], keyType: 'ec' });
    const res = await w.owner.client.post(
      importUrl(w.install.id),
      body(chainOf(leaf, pki.intermediate, pki.root), leaf.keyPem),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.domains, [`www.${base}`, `*.${base}`]);
    const got = await w.owner.client.get(domainCertUrl(w.install.id, www.id));
    assert.equal(got.body.certificate.uuid, res.body.uuid);
    assert.equal(res.body.wildcard, true);
  });

  it('a replaced certificate is deleted with its sealed key; a narrower import keeps the wider one', async () => {
    const { w, name, good, post } = await setup();
    const www = await addDomain(w.owner.client, w.install.id, `www.${name}`);
    const first = await post(good);
    assert.equal(first.status, 200);
    const wideLeaf = pki.leaf({ names: [name, `www.${name}`] });
    const wide = await post(body(chainOf(wideLeaf, pki.intermediate, pki.root), wideLeaf.keyPem));
    assert.equal(wide.status, 200);
    const rows = await t.database.db
      .select()
      .from(certificates)
      .where(eq(certificates.install_id, w.install.id));
    assert.deepEqual(
      rows.map((r) => r.id),
      [wide.body.uuid],
      'the first certificate (and its key) is gone',
    );
    const narrowLeaf = pki.leaf({ names: [`www.${name}`] });
    const narrow = await post(body(chainOf(narrowLeaf, pki.intermediate, pki.root), narrowLeaf.keyPem));
    assert.equal(narrow.status, 200);
    const list = await w.owner.client.get(listUrl(w.install.id));
    assert.deepEqual(
      list.body.certificates.map((c: Json) => c.uuid),
      [wide.body.uuid, narrow.body.uuid],
    );
    assert.equal(
      (await w.owner.client.get(domainCertUrl(w.install.id, www.id))).body.certificate.uuid,
      narrow.body.uuid,
    );
  });
});

describe('getInstallCertificates and getDomainCertificate', () => {
  it('lists the certificates of an install as {certificates, next_page_token} (the platform shape)', async () => {
    const { w, name, good, post } = await setup();
    await post(good);
    const second = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    const leaf2 = pki.leaf({ names: [second.name] });
    await post(body(chainOf(leaf2, pki.intermediate, pki.root), leaf2.keyPem));
    const page = await w.owner.client.get(`${listUrl(w.install.id)}?limit=1`);
    assert.equal(page.status, 200);
    assert.equal(page.body.certificates.length, 1);
    assert.deepEqual(page.body.certificates[0].domains, [name]);
    assert.equal(page.body.next_page_token, '1');
    const last = await w.owner.client.get(
      `${listUrl(w.install.id)}?limit=1&offset=${page.body.next_page_token}`,
    );
    assert.equal(last.body.certificates.length, 1);
    assert.equal('next_page_token' in last.body, false, 'no token on the last page');
    assert.equal((await w.owner.client.get(`${listUrl(w.install.id)}?offset=-1`)).status, 400);
  });

  it('the certificate serving a domain, 404 when none covers it; the domain shows ssl status', async () => {
    const { w, domain, good, post } = await setup();
    assert.equal((await w.owner.client.get(domainCertUrl(w.install.id, domain.id))).status, 404);
    const imported = await post(good);
    const res = await w.owner.client.get(domainCertUrl(w.install.id, domain.id));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      cert_name: imported.body.common_name,
      cert_info: { cert: imported.body.certificate },
      certificate: imported.body,
    });
    const uncovered = await addDomain(w.owner.client, w.install.id, uniqueDomain());
    assert.equal((await w.owner.client.get(domainCertUrl(w.install.id, uncovered.id))).status, 404);
    const sslStatus = async (id: string) =>
      (await w.owner.client.get(`/v1/installs/${w.install.id}/domains/${id}`)).body.network_details
        .network_info.ssl.status;
    assert.equal(await sslStatus(domain.id), 'active');
    assert.equal(await sslStatus(uncovered.id), 'none');
    const start = t.clock.now();
    try {
      t.clock.advance(120 * DAY);
      assert.equal(await sslStatus(domain.id), 'expired');
    } finally {
      t.clock.set(start);
    }
    assert.equal((await w.owner.client.get(domainCertUrl(w.install.id, crypto.randomUUID()))).status, 404);
  });

  it('deleting the install deletes its certificates (cascade)', async () => {
    const { w, good, post } = await setup();
    assert.equal((await post(good)).status, 200);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    const rows = await t.database.db
      .select()
      .from(certificates)
      .where(eq(certificates.install_id, w.install.id));
    assert.equal(rows.length, 0);
  });
});

describe('authorization of the certificate routes (G2, G4, A2)', () => {
  it('401 without credentials, 404 for a foreign account and for a partial user outside its installs', async () => {
    const { w, domain, good } = await setup();
    const routes: [string, string, Json?][] = [
      ['POST', importUrl(w.install.id), good],
      ['GET', listUrl(w.install.id)],
      ['GET', domainCertUrl(w.install.id, domain.id)],
    ];
    const stranger = await f.world();
    const other = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const outside = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [other.id] }]);
    for (const [method, path, payload] of routes) {
      const anon = await t.anonymous.request(method as 'GET', path, payload);
      assert.equal(anon.status, 401, `${method} ${path}`);
      assert.equal(anon.body.message, 'Bad Credentials');
      assert.equal((await stranger.owner.client.request(method as 'GET', path, payload)).status, 404);
      assert.equal((await outside.client.request(method as 'GET', path, payload)).status, 404);
    }
    assert.equal(
      (await t.database.db.select().from(certificates).where(eq(certificates.install_id, w.install.id)))
        .length,
      0,
    );
  });

  it('A2 a partial user may import and read the certificates of its install (no 403)', async () => {
    const { w, domain, good } = await setup();
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const imported = await partial.client.post(importUrl(w.install.id), good);
    assert.equal(imported.status, 200);
    assert.equal((await partial.client.get(listUrl(w.install.id))).body.certificates.length, 1);
    assert.equal(
      (await partial.client.get(domainCertUrl(w.install.id, domain.id))).body.certificate.uuid,
      imported.body.uuid,
    );
  });
});
