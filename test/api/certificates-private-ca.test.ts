import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { extraTrustedRoots } from '../../src/modules/certificates/certificate-chain.js';
import { addDomain, uniqueDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type TestApp } from '../support/harness.js';
import { b64, createPki } from '../support/pki.js';

// A private certificate authority (root -> intermediate -> leaf, made with the openssl CLI) whose
// root is not in Node's list. One app trusts it through NODE_EXTRA_CA_CERTS, the other does not.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-extra-ca-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const pki = createPki();
const rootsFile = path.join(dir, 'extra-roots.pem');
// Another root first: the file may hold several, as Node's own reading of it allows.
const other = createPki();
fs.writeFileSync(rootsFile, other.root.certPem + pki.root.certPem);

const trusting: TestApp = await buildTestApp({ env: { NODE_EXTRA_CA_CERTS: rootsFile } });
const plain: TestApp = await buildTestApp();

/** An install with one domain in `t`, and the leaf + intermediate chain (no root) for it. */
async function scene(t: TestApp) {
  const w = await factories(t).world();
  const name = uniqueDomain('ca');
  await addDomain(w.owner.client, w.install.id, name);
  const leaf = pki.leaf({ names: [name] });
  const body = { certificate: b64(leaf.certPem + pki.intermediate.certPem), private_key: b64(leaf.keyPem) };
  return { w, body, url: `/v1/installs/${w.install.id}/ssl_certificates/third_party` };
}

describe('private certificate authorities (NODE_EXTRA_CA_CERTS)', () => {
  it('L2 a leaf + intermediate chain issued by a root named in NODE_EXTRA_CA_CERTS imports', async () => {
    const { w, body, url } = await scene(trusting);
    const res = await w.owner.client.post(url, body);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.issuer, /Hostplane Test Intermediate CA/);
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/ssl_certificates`);
    assert.equal(list.body.certificates.length, 1);
  });

  it('L2 the same chain without NODE_EXTRA_CA_CERTS is refused: chain_incomplete on certificate, naming the setting', async () => {
    const { w, body, url } = await scene(plain);
    const res = await w.owner.client.post(url, body);
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.errors.length, 1);
    const [error] = res.body.errors;
    assert.equal(error.resource, 'ssl_certificate');
    assert.equal(error.field, 'certificate');
    assert.equal(error.code, 'chain_incomplete');
    assert.match(error.message, /Hostplane Test Root CA/);
    assert.match(error.message, /NODE_EXTRA_CA_CERTS/);
  });

  it('L2 a chain of a root that is not in the file is still refused by the trusting app', async () => {
    const w = await factories(trusting).world();
    const name = uniqueDomain('ca');
    await addDomain(w.owner.client, w.install.id, name);
    const stranger = createPki();
    const leaf = stranger.leaf({ names: [name] });
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/ssl_certificates/third_party`, {
      certificate: b64(leaf.certPem + stranger.intermediate.certPem),
      private_key: b64(leaf.keyPem),
    });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.errors[0].code, 'chain_incomplete');
  });

  it('NODE_EXTRA_CA_CERTS is read through the config; an unreadable or empty file stops the start with its name', () => {
    assert.equal(loadConfig({ NODE_EXTRA_CA_CERTS: rootsFile }).extraCaCertsFile, rootsFile);
    assert.equal(loadConfig({}).extraCaCertsFile, null);
    assert.equal(extraTrustedRoots(rootsFile).length, 2);
    assert.deepEqual(extraTrustedRoots(null), []);
    const missing = path.join(dir, 'missing.pem');
    assert.throws(
      () => extraTrustedRoots(missing),
      /NODE_EXTRA_CA_CERTS: cannot read .*missing\.pem \(ENOENT\)/,
    );
    const empty = path.join(dir, 'empty.pem');
    fs.writeFileSync(empty, 'no certificates here\n');
    assert.throws(() => extraTrustedRoots(empty), /holds no PEM CERTIFICATE block/);
    const broken = path.join(dir, 'broken.pem');
    fs.writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    assert.throws(() => extraTrustedRoots(broken), /certificate 1 of .* does not parse/);
  });
});
