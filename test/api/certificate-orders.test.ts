import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { simulatedCa, simulatedTasks } from '../../src/db/schema.js';
import { createSecretBox } from '../../src/secrets.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { mailOf, operationOf } from '../support/jobs.js';

const dns = await startDnsServer();
const t = await buildTestApp({ env: { DNS_SERVERS: dns.address } });
const f = factories(t);

const orderUrl = (installId: string, domainId: string) =>
  `/v1/installs/${installId}/domains/${domainId}/ssl_certificate`;
const HOLDER = {
  email_address: 'jane@example.test',
  given_name: 'Jane',
  family_name: 'Doe',
  region_code: 'US',
  state: 'Texas',
  city: 'Austin',
  phone: '800-123-4567',
};

/** A world with a verified domain. */
async function scene() {
  const w = await f.world();
  await t.runJobs();
  const name = uniqueDomain('le');
  const domain = await verifyDomain(
    dns,
    w.owner.client,
    w.install.id,
    await addDomain(w.owner.client, w.install.id, name),
  );
  return { w, name, domain };
}

/** The PEM blocks of a base64-encoded chain. */
const chainOf = (b64: string) =>
  [
    ...Buffer.from(b64, 'base64')
      .toString('utf8')
      .matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g),
  ].map((m) => new X509Certificate(m[0]));

describe('createDomainCertificateOrder', () => {
  it('createDomainCertificateOrder: 202 with the operation; the simulated CA issues a real X.509 certificate that the install lists', async () => {
    const { w, name, domain } = await scene();
    const res = await w.owner.client.post(orderUrl(w.install.id, domain.id), HOLDER);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.type, 'order_certificate');
    assert.equal(res.body.status, 'queued');
    assert.deepEqual(res.body.resource, { type: 'domain', id: domain.id });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));

    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/ssl_certificates`);
    assert.equal(list.body.certificates.length, 1);
    const [cert] = list.body.certificates;
    assert.deepEqual(cert.domains, [name]);
    assert.equal(cert.subject, `CN=${name}`);
    assert.match(cert.issuer, /Hostplane Simulated CA/);
    const [leaf, ca] = chainOf(cert.certificate);
    assert.ok(leaf && ca, 'leaf and CA certificate in the chain');
    assert.equal(leaf.checkHost(name), name);
    assert.ok(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), 'signed by the simulated CA');
    assert.ok(ca.ca && ca.verify(ca.publicKey), 'the CA is a self-signed CA certificate');
    assert.equal(leaf.ca, false);
    assert.equal(cert.serial, leaf.serialNumber.toUpperCase());
    assert.equal(cert.fingerprint, leaf.fingerprint256);
    const days = (Date.parse(cert.not_after) - t.clock.now().getTime()) / 86_400_000;
    assert.ok(days > 89 && days <= 90, `valid for 90 days (${days})`);

    const served = await w.owner.client.get(orderUrl(w.install.id, domain.id));
    assert.equal(served.status, 200);
    assert.equal(served.body.id, cert.id);
    const shown = await w.owner.client.get(`/v1/installs/${w.install.id}/domains/${domain.id}`);
    assert.equal(shown.body.network_details.network_info.ssl.status, 'active');
    const mail = await mailOf(t, op.id);
    assert.deepEqual(
      mail.map((m: Json) => m.to_address ?? m.to),
      ['jane@example.test'],
    );
  });

  it('createDomainCertificateOrder: the CA is made once; its key and the issued key are stored only sealed', async () => {
    const { w, domain } = await scene();
    const second = await scene();
    for (const s of [{ w, domain }, second]) {
      assert.equal((await s.w.owner.client.post(orderUrl(s.w.install.id, s.domain.id), HOLDER)).status, 202);
    }
    await t.runJobs();
    const cas = await t.database.db.select().from(simulatedCa);
    assert.equal(cas.length, 1);
    const [row] = cas;
    assert.ok(row);
    assert.doesNotMatch(row.key_sealed, /PRIVATE KEY/);
    assert.ok(createSecretBox(SECRET_KEY).open(row.key_sealed, 'simulated-ca').length > 0);
    const tasks = await t.database.db.select().from(simulatedTasks);
    const issued = tasks.filter((task) => task.operation === 'issue_certificate');
    assert.ok(issued.length >= 2);
    for (const task of issued) assert.doesNotMatch(JSON.stringify(task.result), /PRIVATE KEY/);
    const issuers = [];
    for (const s of [{ w, domain }, second]) {
      const list = await s.w.owner.client.get(`/v1/installs/${s.w.install.id}/ssl_certificates`);
      issuers.push(chainOf(list.body.certificates[0].certificate)[1]?.fingerprint256);
    }
    assert.equal(issuers[0], issuers[1], 'both issued by the one CA');
  });

  it('createDomainCertificateOrder: an unverified domain is accepted (202) and the order fails with the reason', async () => {
    const w = await f.world();
    await t.runJobs();
    const domain = await addDomain(w.owner.client, w.install.id, uniqueDomain('le'));
    const res = await w.owner.client.post(orderUrl(w.install.id, domain.id), HOLDER);
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.match(op.error, /not verified yet/);
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/ssl_certificates`);
    assert.equal(list.body.certificates.length, 0);
  });

  it('createDomainCertificateOrder validates the holder: required fields, email, region code, phone; 400 per field', async () => {
    const { w, domain } = await scene();
    const post = (body: Json) => w.owner.client.post(orderUrl(w.install.id, domain.id), body);
    const missing = await post({});
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body.errors.map((e: Json) => e.field).sort(), [
      'email_address',
      'family_name',
      'given_name',
      'region_code',
    ]);
    for (const [field, value] of [
      ['email_address', 'not-an-email'],
      ['region_code', 'usa'],
      ['region_code', 'us'],
      ['given_name', ''],
      ['phone', 'call me'],
      ['city', 'x'.repeat(101)],
    ] as const) {
      const res = await post({ ...HOLDER, [field]: value });
      assert.equal(res.status, 400, `${field}=${value}`);
      assert.equal(res.body.errors[0].field, field);
      assert.equal(res.body.errors[0].resource, 'ssl_certificate');
    }
  });

  it('createDomainCertificateOrder: an unknown, foreign or malformed domain id is 404 (no Bad Request in its table)', async () => {
    const { w } = await scene();
    const other = await scene();
    for (const id of ['00000000-0000-4000-8000-000000000000', other.domain.id, 'nope']) {
      const res = await w.owner.client.post(orderUrl(w.install.id, id), HOLDER);
      assert.equal(res.status, 404, `${id} ${JSON.stringify(res.body)}`);
    }
  });
});
