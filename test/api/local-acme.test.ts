// test-db: postgres (the web tier's subject is nginx, PHP-FPM, WordPress and ACME, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { type DetailedPeerCertificate, connect as tlsConnect } from 'node:tls';
import { eq } from 'drizzle-orm';
import { acmeAccounts, acmeOrders, dueJobs } from '../../src/db/schema.js';
import { createSecretBox } from '../../src/secrets.js';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';
import { localHosting } from '../support/local-hosting.js';
import { createPki } from '../support/pki.js';
import { freePort, stopWebTier } from '../support/web-tier.js';

// Issue 21: certificate orders of the local driver through real ACME (RFC 8555), against Debian's
// Pebble (scripts/test.sh installs it). One Pebble, one app, one nginx for the file: Pebble resolves
// names with the test DNS server and validates HTTP-01 on this file's nginx port; its API is served
// with a certificate of the test's own CA, trusted through ACME_CA_BUNDLE only.
const TOOLS = [
  '/usr/bin/pebble',
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));

/** GET over HTTPS trusting only `ca`: status and body, or null when it cannot connect. */
function httpsGet(url: string, ca: string): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    const req = https.get(url, { ca, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
  });
}

const certsOf = (pem: string) =>
  [...pem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)].map(
    (m) => new X509Certificate(m[0]),
  );

const HOLDER = {
  email_address: 'jane@example.test',
  given_name: 'Jane',
  family_name: 'Doe',
  region_code: 'US',
};

describe('local driver: certificate orders through ACME against Pebble (issue 21)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const [httpPort, httpsPort, acmePort, mgmtPort, tlsPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const dns = await startDnsServer();
  const pki = createPki();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-pebble-'));
  const tls = pki.leaf({ names: ['localhost'] });
  const caBundle = path.join(dir, 'ca.pem');
  await fs.writeFile(caBundle, pki.root.certPem);
  await fs.writeFile(path.join(dir, 'cert.pem'), tls.certPem + pki.intermediate.certPem);
  await fs.writeFile(path.join(dir, 'key.pem'), tls.keyPem);
  await fs.writeFile(
    path.join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${mgmtPort}`,
        certificate: path.join(dir, 'cert.pem'),
        privateKey: path.join(dir, 'key.pem'),
        httpPort,
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const pebble: ChildProcess = spawn(
    '/usr/bin/pebble',
    ['-config', path.join(dir, 'pebble.json'), '-dnsserver', dns.address],
    {
      env: {
        PATH: '/usr/bin:/bin',
        PEBBLE_VA_NOSLEEP: '1',
        PEBBLE_VA_ALWAYS_VALID: '0',
        PEBBLE_WFE_NONCEREJECT: '0',
        PEBBLE_AUTHZREUSE: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let pebbleLog = '';
  pebble.stdout?.on('data', (c: Buffer) => {
    pebbleLog = (pebbleLog + c.toString()).slice(-20_000);
  });
  pebble.stderr?.on('data', (c: Buffer) => {
    pebbleLog = (pebbleLog + c.toString()).slice(-20_000);
  });
  const directoryUrl = `https://localhost:${acmePort}/dir`;
  for (let i = 0; i < 100 && (await httpsGet(directoryUrl, pki.root.certPem))?.status !== 200; i++)
    await new Promise((r) => setTimeout(r, 100));

  const host = await localHosting({ autoCleanup: false });
  const t = await buildTestApp({
    env: {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(httpPort),
      HOSTING_HTTPS_PORT: String(httpsPort),
      DNS_SERVERS: dns.address,
      ACME_DIRECTORY_URL: directoryUrl,
      ACME_CA_BUNDLE: caBundle,
      ACME_EMAIL: 'ops@example.test',
      PUBLIC_URL: 'https://api.hostplane.test',
    },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];

  after(async () => {
    pebble.kill('SIGTERM');
    await stopWebTier(web, seen);
    await host.cleanup();
    await fs.rm(dir, { recursive: true, force: true });
  });

  // One served install for the file; its domains are added per test.
  const w = await readyWorld(t, f);
  seen.push(w.install.id);
  host.paths(w.install.id);
  const installed = await w.owner.client.get(`/v1/installs/${w.install.id}`);
  const orderUrl = (domainId: string) => `/v1/installs/${w.install.id}/domains/${domainId}/ssl_certificate`;
  const pebbleRoot = async () => {
    const res = await httpsGet(`https://localhost:${mgmtPort}/roots/0`, pki.root.certPem);
    assert.equal(res?.status, 200, 'Pebble answers its root');
    const [root] = certsOf(res?.body ?? '');
    assert.ok(root);
    return root;
  };
  /** A verified domain of the install; `resolves`: its A record points at this machine. */
  async function domain(resolves: boolean) {
    const name = uniqueDomain('acme');
    if (resolves) dns.answer(name, { a: ['127.0.0.1'] });
    const d = await verifyDomain(
      dns,
      w.owner.client,
      w.install.id,
      await addDomain(w.owner.client, w.install.id, name),
    );
    // The domain's apply_routing (started by the add) serves it over HTTP, challenge path included;
    // an order placed before that waits for it (a retried attempt), so routing runs first here.
    await t.runJobs();
    return d;
  }
  /** The chain verifies up to Pebble's root: leaf <- intermediate(s) <- root. */
  function assertVerifies(chain: X509Certificate[], root: X509Certificate) {
    const all = [...chain, root];
    for (let i = 0; i + 1 < all.length; i++) {
      const [cert, issuer] = [all[i] as X509Certificate, all[i + 1] as X509Certificate];
      assert.ok(cert.checkIssued(issuer) && cert.verify(issuer.publicKey), `link ${i} of the chain verifies`);
    }
  }

  let ordered: { domain: Json; serial: string; notAfter: string } | null = null;

  /** The chain nginx serves for `servername` on HOSTING_HTTPS_PORT, the handshake verified against `ca` only. */
  function servedChain(servername: string, ca: string) {
    return new Promise<{ authorized: boolean; chain: X509Certificate[] }>((resolve, reject) => {
      const socket = tlsConnect(
        { host: '127.0.0.1', port: httpsPort, servername, ca, timeout: 5_000 },
        () => {
          const chain: X509Certificate[] = [];
          let peer: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
          while (peer?.raw && !chain.some((c) => c.raw.equals(peer?.raw as Buffer))) {
            chain.push(new X509Certificate(peer.raw));
            peer = peer.issuerCertificate;
          }
          resolve({ authorized: socket.authorized, chain });
          socket.end();
        },
      );
      socket.on('error', reject);
      socket.on('timeout', () => socket.destroy(new Error('TLS connect timed out')));
    });
  }

  it("issue 21: a certificate ordered for a domain of a LOCAL_WEB install comes from the ACME CA (HTTP-01 answered by nginx) and its chain verifies against Pebble's root", async () => {
    assert.equal(installed.body.status, 'active', JSON.stringify(installed.body));
    const d = await domain(true);
    const res = await w.owner.client.post(orderUrl(d.id), HOLDER);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', `${JSON.stringify(op)}\n${pebbleLog.slice(-3000)}`);

    const cert = await w.owner.client.get(orderUrl(d.id));
    assert.equal(cert.status, 200, JSON.stringify(cert.body));
    const chain = certsOf(Buffer.from(cert.body.certificate.certificate, 'base64').toString('utf8'));
    const [leaf] = chain;
    assert.ok(leaf && chain.length >= 2, 'leaf and intermediate');
    assert.equal(leaf.checkHost(d.name), d.name);
    assert.match(leaf.issuer, /Pebble Intermediate/);
    assert.equal(cert.body.certificate.serial, leaf.serialNumber.toUpperCase());
    assertVerifies(chain, await pebbleRoot());
    // The challenge file is gone once the order is done; the account key is sealed at rest.
    const challenges = path.join(host.paths(w.install.id).dir, 'acme-challenge');
    assert.deepEqual(await fs.readdir(challenges), []);
    // One ACME account (its key made once, sealed); the order's certificate key sealed too.
    const accounts = await t.database.db.select().from(acmeAccounts);
    assert.equal(accounts.length, 1);
    const [account] = accounts;
    assert.ok(account);
    assert.ok(account.account_url?.startsWith(`https://localhost:${acmePort}/`), 'registered');
    const box = createSecretBox(SECRET_KEY);
    assert.doesNotMatch(account.key_sealed, /PRIVATE KEY/);
    assert.match(box.open(account.key_sealed, `acme-account:${directoryUrl}`).toString(), /PRIVATE KEY/);
    const orders = await t.database.db.select().from(acmeOrders);
    assert.ok(orders.length >= 1);
    for (const order of orders) assert.doesNotMatch(order.key_sealed, /PRIVATE KEY/);
    ordered = { domain: d, serial: cert.body.certificate.serial, notAfter: cert.body.certificate.not_after };
  });

  it("issue 21 (L1-L2, SNI): the ordered certificate is served by nginx on HOSTING_HTTPS_PORT for its name, and the served chain verifies against Pebble's root", async () => {
    assert.ok(ordered, 'the first test ordered a certificate');
    // storeIssued started the install's apply_routing: let it run (it may already have).
    await t.runJobs();
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const routing = ops.body.results.filter((o: Json) => o.type === 'apply_routing');
    assert.ok(routing.length > 0 && routing[0].status === 'completed', JSON.stringify(routing.slice(0, 2)));
    const root = await pebbleRoot();
    // Node verifies the handshake against Pebble's root only (the chain must lead there) and the name.
    const served = await servedChain(ordered.domain.name, root.toString());
    assert.equal(served.authorized, true, 'the served chain verifies against the root');
    const [leaf] = served.chain;
    assert.ok(leaf);
    assert.equal(
      leaf.serialNumber.toUpperCase(),
      ordered.serial,
      'the ordered certificate is the one served',
    );
    assert.equal(leaf.checkHost(ordered.domain.name), ordered.domain.name);
    const chain = served.chain.filter((c) => !c.raw.equals(root.raw));
    assert.ok(chain.length >= 2, 'leaf and intermediate served');
    assertVerifies(chain, root);
    // A name the install has no certificate for gets no certificate (the TLS default refuses it).
    await assert.rejects(servedChain(uniqueDomain('nocert'), root.toString()));
  });

  it('issue 21: a challenge the CA cannot validate (the name resolves nowhere) fails the order with the ACME problem; no certificate is stored', async () => {
    const d = await domain(false);
    const res = await w.owner.client.post(orderUrl(d.id), HOLDER);
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.match(op.error, new RegExp(`challenge for ${d.name.replace(/\./g, '\\.')} failed: .+`));
    assert.match(op.error, /urn:ietf:params:acme:error:/, 'the ACME problem type is in the error');
    assert.equal((await w.owner.client.get(orderUrl(d.id))).status, 404);
  });

  it('issue 21: an ACME certificate is renewed as due work before it expires: moving the clock there gives a completed renewal order and a new certificate', async () => {
    assert.ok(ordered, 'the first test ordered a certificate');
    // The renewal's due work (other due work, e.g. a pending domain's background check, may come first).
    const [renewal] = await t.database.db
      .select({ run_at: dueJobs.run_at })
      .from(dueJobs)
      .where(eq(dueJobs.key, `renew_certificate:${w.install.id}:${ordered.domain.id}`));
    assert.ok(renewal, 'the renewal is due work');
    const due = renewal.run_at.getTime();
    const expires = Date.parse(ordered.notAfter);
    assert.ok(
      due < expires && expires - due <= 30 * 86_400_000,
      `renewal due before expiry (${renewal.run_at.toISOString()})`,
    );
    // Just before: nothing is ordered yet.
    await t.admin.post('/admin/v1/clock', { now: new Date(due - 60_000).toISOString() });
    await t.runJobs();
    const before = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const orders = (b: Json) =>
      b.results.filter((o: Json) => o.type === 'order_certificate' && o.resource?.id === ordered?.domain.id);
    assert.equal(orders(before.body).length, 1);
    // Due: the renewal order runs and completes.
    await t.admin.post('/admin/v1/clock', { now: new Date(due + 1_000).toISOString() });
    await t.runJobs();
    const afterOps = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const renewals = orders(afterOps.body);
    assert.equal(renewals.length, 2, JSON.stringify(afterOps.body.results.slice(0, 3)));
    assert.ok(
      renewals.every((o: Json) => o.status === 'completed'),
      JSON.stringify(renewals),
    );
    const cert = await w.owner.client.get(orderUrl(ordered.domain.id));
    assert.equal(cert.status, 200);
    assert.notEqual(cert.body.certificate.serial, ordered.serial, 'a new certificate');
    const chain = certsOf(Buffer.from(cert.body.certificate.certificate, 'base64').toString('utf8'));
    assertVerifies(chain, await pebbleRoot());
  });
});
