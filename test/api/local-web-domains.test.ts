// test-db: postgres (the web tier's subject is nginx, PHP-FPM, WordPress and ACME, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { startDnsServer } from '../support/dns-server.js';
import { addDomain, uniqueDomain, verifyDomain } from '../support/domains.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Client, type Json } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';
import { localHosting } from '../support/local-hosting.js';
import { b64, createPki } from '../support/pki.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 21, routing: with HOSTING_DRIVER=local and LOCAL_WEB=on, an install's domains (D1-D7), its
// redirects and its certificates (L1-L2) are served for real by the nginx of this file's own
// HOSTING_ROOT (one app, one nginx, two installs for the whole file). Every change goes through the
// API, is applied by the install's apply_routing operation and is checked over HTTP(S).
const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
  '/usr/bin/openssl',
];
const missing = TOOLS.filter((p) => !existsSync(p));

type Answer = {
  status: number;
  body: string;
  location: string | undefined;
  /** nginx's page cache status (X-Cache-Status), when the answer went through it. */
  cache?: string | undefined;
} | null;

/** GET on nginx with a Host header: status, body and Location, or null when nginx closed the connection. */
function get(port: number, host: string, urlPath = '/'): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, headers: { host: `${host}:${port}` }, timeout: 30_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            location: res.headers.location ?? undefined,
            cache: res.headers['x-cache-status'] as string | undefined,
          }),
        );
      },
    );
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** GET over HTTPS with SNI `host`, trusting only `ca`: null when the handshake or the request fails. */
function getTls(port: number, host: string, ca: string, urlPath = '/'): Promise<Answer> {
  return new Promise((resolve) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: urlPath,
        servername: host,
        ca,
        headers: { host: `${host}:${port}` },
        timeout: 30_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            location: res.headers.location ?? undefined,
            cache: res.headers['x-cache-status'] as string | undefined,
          }),
        );
      },
    );
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** Asks until `ok` holds (a reload's new workers take a moment), answering the last response. */
async function until(ask: () => Promise<Answer>, ok: (r: Answer) => boolean) {
  let last: Answer = null;
  for (let i = 0; i < 50; i++) {
    last = await ask();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

/**
 * Asks each of `asks` over and over (a short pause between two) until `end()`, which answers every
 * answer got: clients requesting throughout a routing change.
 */
function hammer(asks: (() => Promise<Answer>)[]) {
  let stopped = false;
  const got: Answer[] = [];
  const loops = asks.map(async (ask) => {
    while (!stopped) {
      got.push(await ask());
      await new Promise((r) => setTimeout(r, 25));
    }
  });
  return {
    async end() {
      stopped = true;
      await Promise.all(loops);
      return got;
    },
  };
}

/** The serial of the certificate nginx shows for `servername` (openssl s_client), or null: none shown. */
function servedSerial(port: number, servername: string): string | null {
  const shown = spawnSync(
    'openssl',
    ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', servername],
    { input: '', encoding: 'utf8', timeout: 20_000 },
  );
  const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(shown.stdout)?.[0];
  return pem ? serialOf(pem) : null;
}

const serialOf = (pem: string) =>
  execFileSync('openssl', ['x509', '-noout', '-serial'], { input: pem, encoding: 'utf8' })
    .trim()
    .replace(/^serial=/, '')
    .toUpperCase();

const slugOf = (id: string) => `hp_${id.replace(/-/g, '')}`;

describe('local driver: domains, redirects and HTTPS served by nginx (issue 21)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const [port, tlsPort] = [await freePort(), await freePort()];
  const pki = createPki();
  // D6 (issue 28 finding 8): a domain is served once verified; its TXT records come from this server.
  const dns = await startDnsServer();
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-routing-'));
  const rootsFile = path.join(scratch, 'roots.pem');
  await fs.writeFile(rootsFile, pki.root.certPem);
  const host = await localHosting({ autoCleanup: false });
  const t = await buildTestApp({
    env: {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(port),
      HOSTING_HTTPS_PORT: String(tlsPort),
      NODE_EXTRA_CA_CERTS: rootsFile,
      PUBLIC_URL: 'https://api.hostplane.test',
      DNS_SERVERS: dns.address,
    },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];
  const url = (name: string) => `http://${name}:${port}`;

  after(async () => {
    await stopWebTier(web, seen);
    await host.cleanup();
    await fs.rm(scratch, { recursive: true, force: true });
  });

  async function served() {
    const w = await readyWorld(t, f);
    seen.push(w.install.id);
    host.paths(w.install.id);
    const install = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(install.body.status, 'active', JSON.stringify(install.body));
    const cname = install.body.cname as string;
    assert.equal(
      (
        await until(
          () => get(port, cname),
          (r) => r?.status === 200,
        )
      )?.status,
      200,
    );
    return { w, cname };
  }

  /** createDomain then verifyDomainTxtRecord (D6: only a verified domain is served); the verified record. */
  const addServed = async (client: Client, installId: string, name: string, extra = {}) =>
    verifyDomain(dns, client, installId, await addDomain(client, installId, name, extra));

  /** The install's apply_routing operations, newest first. */
  async function routingOps(client: Client, installId: string): Promise<Json[]> {
    const res = await client.get(`/v1/installs/${installId}/operations`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (res.body.results as Json[]).filter((op) => op.type === 'apply_routing');
  }

  /** The one apply_routing operation started since `before` (the test clock may not move between them). */
  async function newRoutingOp(client: Client, installId: string, before: Json[]) {
    const known = new Set(before.map((op) => op.id));
    const fresh = (await routingOps(client, installId)).filter((op) => !known.has(op.id));
    assert.equal(fresh.length, 1, JSON.stringify(fresh));
    return fresh[0] as Json;
  }

  /** WordPress's home and siteurl, read from the install's database. */
  async function siteUrls(installId: string) {
    const rows = await host.rows(installId, 'wp_options');
    const value = (name: string) => String(rows.find((r) => r.option_name === name)?.option_value);
    return { home: value('home'), siteurl: value('siteurl') };
  }

  // Install A: D1-D6 and the nginx -t fault; install B: HTTPS and deprovisioning.
  let a: Awaited<ReturnType<typeof served>> | undefined;
  const installA = async () => {
    a ??= await served();
    return a;
  };

  it('D1 D4 D5 issue 21: two domains, the primary serves the site (home and siteurl follow it), the other answers 301 to it with its path; the changes are applied by one apply_routing operation', async () => {
    const { w, cname } = await installA();
    const client = w.owner.client;
    const primaryName = uniqueDomain('www');
    const oldName = uniqueDomain('old');
    const primary = await addServed(client, w.install.id, primaryName, { primary: true });
    await addServed(client, w.install.id, oldName, { redirect_to: primary.id });
    // Both changes while its step is queued: one operation applies them (coalesced).
    const [op] = await routingOps(client, w.install.id);
    assert.equal(op?.status, 'queued');
    await t.runJobs();
    const ops = await routingOps(client, w.install.id);
    assert.equal(ops.length, 1, JSON.stringify(ops));
    assert.equal(ops[0]?.status, 'completed', JSON.stringify(ops[0]));

    const page = await until(
      () => get(port, primaryName),
      (r) => r?.status === 200,
    );
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.match(page?.body ?? '', /Hello world!/);
    assert.ok(page?.body.includes(w.site.name), 'the site title is on the primary domain');
    // D4: WordPress's URLs follow the primary domain (its links point there).
    assert.deepEqual(await siteUrls(w.install.id), { home: url(primaryName), siteurl: url(primaryName) });
    assert.ok(page?.body.includes(`${url(primaryName)}/`), 'links use the primary domain');
    // D5: the redirecting domain answers 301 to the primary, path and query kept.
    const moved = await get(port, oldName, '/2024/hello/?p=1&x=y');
    assert.equal(moved?.status, 301, JSON.stringify(moved));
    assert.equal(moved?.location, `${url(primaryName)}/2024/hello/?p=1&x=y`);
    // The default name still serves the site.
    assert.equal((await get(port, cname))?.status, 200);
    // HTTP-01 answers (for ACME) on every name, the redirecting one too: not redirected.
    const token = 'tok_Abc-123';
    await fs.writeFile(path.join(host.paths(w.install.id).dir, 'acme-challenge', token), 'token.thumbprint');
    for (const name of [oldName, primaryName, cname]) {
      const answer = await get(port, name, `/.well-known/acme-challenge/${token}`);
      assert.equal(answer?.status, 200, `${name}: ${JSON.stringify(answer)}`);
      assert.equal(answer?.body, 'token.thumbprint');
    }
  });

  it('D1 D4 issue 21: a deleted domain is no longer served; a primary set back to false gives WordPress the default name again', async () => {
    const { w, cname } = await installA();
    const client = w.owner.client;
    const list = await client.get(`/v1/installs/${w.install.id}/domains`);
    const domains = list.body.results as Json[];
    const old = domains.find((d) => !d.primary);
    const primary = domains.find((d) => d.primary);
    assert.ok(old && primary, JSON.stringify(list.body));
    assert.equal((await get(port, old.name))?.status, 301);
    const before = await routingOps(client, w.install.id);
    assert.equal((await client.delete(`/v1/installs/${w.install.id}/domains/${old.id}`)).status, 204);
    const off = await client.patch(`/v1/installs/${w.install.id}/domains/${primary.id}`, { primary: false });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    await t.runJobs();
    assert.equal((await newRoutingOp(client, w.install.id, before)).status, 'completed');
    // The default server closes the connection for a name no install serves.
    assert.equal(
      await until(
        () => get(port, old.name),
        (r) => r === null,
      ),
      null,
    );
    assert.equal(
      (await get(port, primary.name))?.status,
      200,
      'a domain that is not primary is still served',
    );
    assert.deepEqual(await siteUrls(w.install.id), { home: url(cname), siteurl: url(cname) });
    const conf = await fs.readFile(path.join(web, 'sites', `${slugOf(w.install.id)}.conf`), 'utf8');
    assert.equal(conf.includes(old.name), false);
  });

  it('D1 issue 21: a domain name that could inject configuration is refused with a 400 before anything is stored or routed', async () => {
    const { w } = await installA();
    const client = w.owner.client;
    const before = await client.get(`/v1/installs/${w.install.id}/domains`);
    const opsBefore = (await routingOps(client, w.install.id)).length;
    const hostile = [
      'evil.example.test; include /etc/passwd',
      'a;b.example.test',
      'x.example.test{',
      'a}b.example.test',
      '"quoted".example.test',
      "it's.example.test",
      '$host.example.test',
      'a b.example.test',
      'a\tb.example.test',
      'a\nb.example.test',
      'line.example.test\nserver_name x',
      'back\\slash.example.test',
      'under_score.example.test',
      'at@sign.example.test',
      '#comment.example.test',
    ];
    for (const name of hostile) {
      const res = await client.post(`/v1/installs/${w.install.id}/domains`, { name });
      assert.equal(res.status, 400, `${JSON.stringify(name)}: ${res.status} ${JSON.stringify(res.body)}`);
      const bulk = await client.post(`/v1/installs/${w.install.id}/domains/bulk`, {
        domains: [{ name: uniqueDomain('ok') }, { name }],
      });
      assert.equal(bulk.status, 400, `bulk ${JSON.stringify(name)}: ${bulk.status}`);
    }
    const after = await client.get(`/v1/installs/${w.install.id}/domains`);
    assert.equal(after.body.count, before.body.count, 'nothing was stored');
    assert.equal((await routingOps(client, w.install.id)).length, opsBefore, 'nothing was routed');
  });

  it('issue 21: nginx -t failing (fault injected) fails the apply_routing operation after its retries; the sites served before still answer and the new name is not served', async () => {
    const { w, cname } = await installA();
    const client = w.owner.client;
    const broken = path.join(web, 'sites', 'zz-broken.conf');
    await fs.writeFile(broken, 'server { listen oops; \n');
    const name = uniqueDomain('late');
    const before = await routingOps(client, w.install.id);
    try {
      await addServed(client, w.install.id, name);
      await t.runJobs();
      const op = await newRoutingOp(client, w.install.id, before);
      assert.equal(op.status, 'failed', JSON.stringify(op));
      assert.match(String(op?.error), /nginx refused the new configuration, the running one is kept/);
      const page = await get(port, cname);
      assert.equal(page?.status, 200);
      assert.match(page?.body ?? '', /Hello world!/);
      assert.equal(await get(port, name), null, 'the refused configuration is not live');
    } finally {
      await fs.rm(broken, { force: true });
    }
    // The next change applies the whole state again, the name refused before included.
    const failed = await routingOps(client, w.install.id);
    const other = await addServed(client, w.install.id, uniqueDomain('next'));
    await t.runJobs();
    assert.equal((await newRoutingOp(client, w.install.id, failed)).status, 'completed');
    assert.equal(
      (
        await until(
          () => get(port, name),
          (r) => r?.status === 200,
        )
      )?.status,
      200,
    );
    assert.equal((await get(port, other.name))?.status, 200);
  });

  it('issue 29 defect 1: with clients requesting throughout a certificate import and then a primary change, HTTPS serves the site with https:// links within seconds of each operation: no cached redirect to the wrong port, no page from the old site URL', async () => {
    const { w } = await installA();
    const client = w.owner.client;
    const ca = pki.root.certPem;
    const [one, two] = [uniqueDomain('c1'), uniqueDomain('c2')];
    await addServed(client, w.install.id, one, { primary: true });
    const second = await addServed(client, w.install.id, two);
    await t.runJobs();
    // The other name serves the site with the primary's links (WordPress keeps the requested host;
    // a port other than home's gets its canonical redirect to home's port: what nginx kept 10 minutes).
    const other = await until(
      () => get(port, two),
      (r) => r?.status === 200,
    );
    assert.ok(other?.body.includes(`${url(one)}/`), JSON.stringify(other).slice(0, 300));
    // The page cache still works: a page asked twice is a HIT (its key tells scheme, host and port apart).
    assert.equal((await get(port, two))?.cache, 'HIT');
    /** Three answers in a row (after the first good one) hold `ok`: stable, not one lucky miss. */
    const settled = async (ask: () => Promise<Answer>, ok: (r: Answer) => boolean) => {
      const first = await until(ask, ok);
      assert.ok(ok(first), JSON.stringify(first).slice(0, 400));
      for (let i = 0; i < 3; i++) {
        const again = await ask();
        assert.ok(ok(again), JSON.stringify(again).slice(0, 400));
      }
    };
    const during = hammer(
      [one, two].flatMap((n) => [
        () => get(port, n),
        () => getTls(tlsPort, n, ca),
        () => getTls(tlsPort, n, ca),
      ]),
    );
    try {
      const leaf = pki.leaf({ names: [one, two] });
      const imported = await client.post(`/v1/installs/${w.install.id}/ssl_certificates/third_party`, {
        certificate: b64(leaf.certPem + pki.intermediate.certPem),
        private_key: b64(leaf.keyPem),
      });
      assert.equal(imported.status, 200, JSON.stringify(imported.body));
      await t.runJobs();
      const secure = `https://${one}:${tlsPort}`;
      assert.equal((await siteUrls(w.install.id)).home, secure);
      // Both names over HTTPS: the site with https:// links to the primary, no redirect to the HTTP port.
      for (const name of [one, two])
        await settled(
          () => getTls(tlsPort, name, ca),
          (r) => r?.status === 200 && r.body.includes(`${secure}/`) && !r.body.includes(`${one}:${port}`),
        );

      const patched = await client.patch(`/v1/installs/${w.install.id}/domains/${second.id}`, {
        primary: true,
      });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      await t.runJobs();
      const next = `https://${two}:${tlsPort}`;
      assert.equal((await siteUrls(w.install.id)).home, next);
      // No page built from the old primary's URL is answered (it was cached for both names before).
      for (const name of [two, one])
        await settled(
          () => getTls(tlsPort, name, ca),
          (r) => r?.status === 200 && r.body.includes(`${next}/`) && !r.body.includes(`${secure}/`),
        );
    } finally {
      const answers = await during.end();
      assert.ok(answers.length > 0);
    }
  });

  // Install B: a certificate, then the install's deletion.
  let b: (Awaited<ReturnType<typeof served>> & { name: string; serial: string }) | undefined;

  it("L1 L2 issue 21: an imported certificate (the test's own CA) is served by SNI on HOSTING_HTTPS_PORT; its key is 0600 and root's, out of the install's PHP's reach; home becomes https", async () => {
    const s = await served();
    const client = s.w.owner.client;
    const name = uniqueDomain('tls');
    await addServed(client, s.w.install.id, name, { primary: true });
    await t.runJobs();
    // No certificate yet: nothing listens on the HTTPS port (it is bound once one is served).
    assert.equal(servedSerial(tlsPort, name), null);
    const leaf = pki.leaf({ names: [name] });
    const before = await routingOps(client, s.w.install.id);
    const imported = await client.post(`/v1/installs/${s.w.install.id}/ssl_certificates/third_party`, {
      certificate: b64(leaf.certPem + pki.intermediate.certPem),
      private_key: b64(leaf.keyPem),
    });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));
    await t.runJobs();
    assert.equal((await newRoutingOp(client, s.w.install.id, before)).status, 'completed');
    const serial = serialOf(leaf.certPem);
    assert.equal(servedSerial(tlsPort, name), serial);
    // A name no certificate covers: the handshake is refused, no certificate is shown.
    assert.equal(servedSerial(tlsPort, `nobody.${name}`), null);
    const page = await until(
      () => getTls(tlsPort, name, pki.root.certPem),
      (r) => r?.status === 200,
    );
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 300));
    assert.match(page?.body ?? '', /Hello world!/);
    assert.equal((await siteUrls(s.w.install.id)).home, `https://${name}:${tlsPort}`);

    const tls = path.join(host.paths(s.w.install.id).dir, 'tls');
    assert.equal((await fs.stat(tls)).mode & 0o777, 0o700);
    const keys = (await fs.readdir(tls)).filter((n) => n.endsWith('.key'));
    assert.equal(keys.length, 1);
    const keyFile = path.join(tls, keys[0] ?? '');
    const stat = await fs.stat(keyFile);
    assert.equal(stat.mode & 0o777, 0o600);
    assert.equal(stat.uid, 0);
    // The install's PHP cannot read it (nor its directory).
    const probe = path.join(host.paths(s.w.install.id).public, 'probe.php');
    await fs.writeFile(
      probe,
      `<?php echo @file_get_contents(${JSON.stringify(keyFile)}) === false ? 'DENIED' : 'READ';`,
    );
    execFileSync('chown', [`${userOf(s.w.install.id)}:${userOf(s.w.install.id)}`, probe]);
    const probed = await get(port, s.cname, '/probe.php');
    assert.equal(probed?.status, 200, JSON.stringify(probed));
    assert.equal(probed?.body, 'DENIED');
    await fs.rm(probe);
    b = { ...s, name, serial };
  });

  it('D2 issue 21: secure_all_urls on a domain with a served certificate answers its plain-HTTP requests with a 301 to the same URL over HTTPS (ACME challenges excepted); false serves HTTP again; without a certificate HTTP serves', async () => {
    assert.ok(b, 'runs after the certificate test');
    const { w, cname, name } = b;
    const client = w.owner.client;
    const list = await client.get(`/v1/installs/${w.install.id}/domains`);
    const domain = (list.body.results as Json[]).find((d) => d.name === name);
    assert.ok(domain, JSON.stringify(list.body));
    // Another domain, no certificate covers it.
    const bare = await addServed(client, w.install.id, uniqueDomain('bare'));
    await t.runJobs();
    const setSecure = async (id: string, on: boolean) => {
      const before = await routingOps(client, w.install.id);
      const res = await client.patch(`/v1/installs/${w.install.id}/domains/${id}`, { secure_all_urls: on });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.secure_all_urls, on);
      await t.runJobs();
      assert.equal((await newRoutingOp(client, w.install.id, before)).status, 'completed');
    };
    await setSecure(domain.id, true);
    await setSecure(bare.id, true);
    const moved = await until(
      () => get(port, name, '/2024/hello/?p=1&x=y'),
      (r) => r?.status === 301,
    );
    assert.equal(moved?.status, 301, JSON.stringify(moved));
    assert.equal(moved?.location, `https://${name}:${tlsPort}/2024/hello/?p=1&x=y`);
    // HTTP-01 answers are not redirected (a renewal needs them over HTTP).
    const token = 'tok_Secure-1';
    await fs.writeFile(path.join(host.paths(w.install.id).dir, 'acme-challenge', token), 'secure.thumbprint');
    const challenge = await get(port, name, `/.well-known/acme-challenge/${token}`);
    assert.equal(challenge?.status, 200, JSON.stringify(challenge));
    assert.equal(challenge?.body, 'secure.thumbprint');
    // HTTPS serves the site; the default name and the domain no certificate covers still serve HTTP
    // (a static file: WordPress itself would send a plain-HTTP page to home's port, the HTTPS one).
    assert.equal((await getTls(tlsPort, name, pki.root.certPem))?.status, 200);
    const asset = '/wp-includes/css/dist/block-library/style.min.css';
    assert.equal((await get(port, cname, asset))?.status, 200);
    assert.equal((await get(port, bare.name, asset))?.status, 200);
    const upgraded = await get(port, name, asset);
    assert.equal(upgraded?.status, 301);
    assert.equal(upgraded?.location, `https://${name}:${tlsPort}${asset}`);

    await setSecure(domain.id, false);
    const served = await until(
      () => get(port, name, asset),
      (r) => r?.status === 200,
    );
    assert.equal(served?.status, 200, JSON.stringify(served).slice(0, 300));
    const conf = await fs.readFile(path.join(web, 'sites', `${slugOf(w.install.id)}.conf`), 'utf8');
    assert.equal(conf.includes('return 301 https://$host'), false);
  });

  it("issue 30 (decision 240): the agent's reconcile names a certificate file that is gone (its routing asked for again), makes a database user that is gone again, and reports a database that is gone", async () => {
    assert.ok(b, 'the imported certificate test ran');
    const id = b.w.install.id as string;
    const reconcile = t.app.services.driver.reconcile;
    assert.ok(reconcile, 'the local driver with its web tier reconciles');
    const mine = (lines: string[]) => lines.filter((l) => l.includes(id));
    assert.deepEqual(mine((await reconcile([id])).drift), []);
    // A certificate file gone (nginx's next reload would fail for every install).
    const tls = path.join(host.paths(id).dir, 'tls');
    const crt = (await fs.readdir(tls)).find((n) => n.endsWith('.crt')) ?? '';
    const aside = path.join(host.root, 'aside.crt');
    await fs.rename(path.join(tls, crt), aside);
    let found = await reconcile([id]);
    assert.deepEqual(mine(found.drift), [`install ${id}: its certificate files are missing (${crt})`]);
    assert.deepEqual(found.routing_missing, [id]);
    await fs.rename(aside, path.join(tls, crt));
    // Its database user gone: the site cannot reach its database; made again, it serves.
    await host.admin.query(`DROP USER \`${slugOf(id)}\`@'%'`);
    found = await reconcile([id]);
    assert.deepEqual(mine(found.repaired), [`install ${id}: its database user was missing: made again`]);
    assert.deepEqual(mine(found.drift), []);
    const name = b.name;
    const page = await until(
      () => getTls(tlsPort, name, pki.root.certPem),
      (r) => r?.status === 200 && /Hello world!/.test(r.body),
    );
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 300));
    // Its database gone: reported (its rows are in its backups), not made empty.
    await host.admin.query(`DROP DATABASE \`${slugOf(id)}\``);
    found = await reconcile([id]);
    assert.deepEqual(mine(found.drift), [`install ${id}: its database is missing (restore a backup)`]);
    assert.deepEqual(mine(found.repaired), []);
  });

  it('issue 28 finding 8 (D6): an unverified domain serves nothing; another install adding the same name never serves it, cannot verify it (400), and a bad row cannot make nginx serve it from that install', async () => {
    assert.ok(b, 'runs after the certificate test');
    // nginx serves a duplicate server_name from the first file in name order: the attacker's sorts first.
    const [attacker, victim] = [await installA(), b].sort((p, q) =>
      slugOf(p.w.install.id) < slugOf(q.w.install.id) ? -1 : 1,
    );
    if (!attacker || !victim) throw new Error('two installs');
    // Each install answers a challenge path of its own on every name it serves: who serves the name.
    const token = 'tok_WhoServes-8';
    for (const [who, s] of [
      ['victim', victim],
      ['attacker', attacker],
    ] as const)
      await fs.writeFile(path.join(host.paths(s.w.install.id).dir, 'acme-challenge', token), who);
    const name = uniqueDomain('shop');
    const whoServes = async () =>
      (await get(port, name, `/.well-known/acme-challenge/${token}`))?.body ?? null;
    /**
     * Asks until `who` serves the name (a reload's new workers take a moment, and on a busy machine
     * one request may close or time out); answers the last.
     */
    const servedBy = async (who: string) => {
      for (let i = 0; i < 50; i++) {
        const now = await whoServes();
        if (now === who) return now;
        await new Promise((r) => setTimeout(r, 200));
      }
      return whoServes();
    };

    const victimDomain = await addDomain(victim.w.owner.client, victim.w.install.id, name);
    const attackerDomain = await addDomain(attacker.w.owner.client, attacker.w.install.id, name);
    await t.runJobs();
    assert.equal(await whoServes(), null, 'unverified on both: served by neither (closed)');
    const confOf = (id: string) => fs.readFile(path.join(web, 'sites', `${slugOf(id)}.conf`), 'utf8');
    assert.equal((await confOf(attacker.w.install.id)).includes(name), false);

    await verifyDomain(dns, victim.w.owner.client, victim.w.install.id, victimDomain);
    await t.runJobs();
    assert.equal(await servedBy('victim'), 'victim');
    // The attacker publishes its own record: the name is verified elsewhere, a clear 400.
    dns.answer(attackerDomain.txt_verification_key, { txt: [attackerDomain.txt_verification_value] });
    const refused = await attacker.w.owner.client.post(
      `/v1/installs/${attacker.w.install.id}/domains/${attackerDomain.id}/verification`,
    );
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.equal(refused.body.errors?.[0]?.code, 'domain_verified_elsewhere', JSON.stringify(refused.body));
    await t.runJobs();
    assert.equal(await servedBy('victim'), 'victim');

    // A bad row (the victim's record gone while its block still serves the name): the attacker's
    // verification goes through, but the web tier refuses a block naming a name another serves.
    await t.database.db.execute(sql`delete from domains where id = ${victimDomain.id}`);
    const before = await routingOps(attacker.w.owner.client, attacker.w.install.id);
    const verified = await attacker.w.owner.client.post(
      `/v1/installs/${attacker.w.install.id}/domains/${attackerDomain.id}/verification`,
    );
    assert.equal(verified.body.ownership_status, 'TXT_VERIFIED', JSON.stringify(verified.body));
    await t.runJobs();
    const op = await newRoutingOp(attacker.w.owner.client, attacker.w.install.id, before);
    assert.equal(op.status, 'failed', JSON.stringify(op));
    assert.match(
      String(op.error),
      new RegExp(`${name.replace(/\./g, '\\.')} is served by ${slugOf(victim.w.install.id)}`),
    );
    assert.equal(await servedBy('victim'), 'victim');
    assert.equal((await confOf(attacker.w.install.id)).includes(name), false);
    // The attacker's record removed: its routing applies again (without the name).
    const cleared = await routingOps(attacker.w.owner.client, attacker.w.install.id);
    const removed = await attacker.w.owner.client.delete(
      `/v1/installs/${attacker.w.install.id}/domains/${attackerDomain.id}`,
    );
    assert.equal(removed.status, 204);
    await t.runJobs();
    assert.equal(
      (await newRoutingOp(attacker.w.owner.client, attacker.w.install.id, cleared)).status,
      'completed',
    );
    assert.equal(await servedBy('victim'), 'victim');
  });

  it('issue 21: deleting the install removes its server blocks (reloaded), certificates, pool, user, files and database: its names are no longer served', async () => {
    assert.ok(b, 'runs after the certificate test');
    const { w, cname, name } = b;
    const slug = slugOf(w.install.id);
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    await t.runJobs();
    assert.equal(
      await until(
        () => get(port, cname),
        (r) => r === null,
      ),
      null,
    );
    assert.equal(await get(port, name), null);
    assert.equal(servedSerial(tlsPort, name), null);
    assert.equal(existsSync(host.paths(w.install.id).dir), false);
    for (const file of await fs.readdir(path.join(web, 'sites')))
      assert.equal((await fs.readFile(path.join(web, 'sites', file), 'utf8')).includes(slug), false, file);
    assert.equal((await fs.readFile(path.join(web, 'nginx.conf'), 'utf8')).includes(slug), false);
    assert.equal(existsSync(path.join(web, 'pools', `${slug}.conf`)), false);
    assert.throws(() => execFileSync('id', ['-u', userOf(w.install.id)], { stdio: 'ignore' }));
    assert.equal(await host.databaseExists(w.install.id), false);
    assert.equal(await host.userExists(w.install.id), false);
    // Install A is still served (a static file: its WordPress's home is on the HTTPS port by now).
    const { cname: other } = await installA();
    assert.equal((await get(port, other, '/wp-includes/css/dist/block-library/style.min.css'))?.status, 200);
  });

  /** A post in the install's database (content as given); answers its id. */
  async function insertPost(installId: string, title: string, content: string): Promise<number> {
    const [inserted] = (await host.admin.query(
      `INSERT INTO \`${slugOf(installId)}\`.wp_posts (post_author, post_date, post_date_gmt, post_content, post_title,
         post_excerpt, post_status, post_name, to_ping, pinged, post_modified, post_modified_gmt,
         post_content_filtered, guid, post_type)
       VALUES (1, NOW(), UTC_TIMESTAMP(), ?, ?, '', 'publish', 'routed-post', '', '', NOW(), UTC_TIMESTAMP(), '', '', 'post')`,
      [content, title],
    )) as unknown as [{ insertId: number }];
    return inserted.insertId;
  }

  it("C1-C4 issue 21: a copy rewrites every host name of the source (default name, primary, redirecting domain) to the destination's primary URL (https: a certificate covers it), and the destination's routing is applied again after it", async () => {
    const source = await served();
    const client = source.w.owner.client;
    const sourcePrimary = uniqueDomain('sp');
    const sourceOld = uniqueDomain('so');
    const primary = await addServed(client, source.w.install.id, sourcePrimary, { primary: true });
    await addServed(client, source.w.install.id, sourceOld, { redirect_to: primary.id });
    const destination = await f.install(client, source.w.account.id, source.w.site.id, 'staging');
    seen.push(destination.id);
    host.paths(destination.id);
    await t.runJobs();
    const destinationName = uniqueDomain('dp');
    await addServed(client, destination.id, destinationName, { primary: true });
    const leaf = pki.leaf({ names: [destinationName] });
    const imported = await client.post(`/v1/installs/${destination.id}/ssl_certificates/third_party`, {
      certificate: b64(leaf.certPem + pki.intermediate.certPem),
      private_key: b64(leaf.keyPem),
    });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));
    await t.runJobs();
    const target = `https://${destinationName}:${tlsPort}`;
    assert.equal((await siteUrls(destination.id)).home, target);

    const title = `Routed copy ${source.w.install.id.slice(0, 8)}`;
    const content = [
      `<a href="${url(sourcePrimary)}/about/">primary</a>`,
      `<a href="${url(sourceOld)}/old/">redirecting</a>`,
      `<a href="https://${sourcePrimary}:${tlsPort}/secure/">secure</a>`,
      `<img src="//${source.cname}:${port}/x.png">`,
      // Not a host name of the source: a longer name, and another port.
      `<a href="http://${sourcePrimary}.elsewhere.test/">other host</a>`,
      `<a href="http://${sourcePrimary}:1/">other port</a>`,
    ].join(' ');
    const postId = await insertPost(source.w.install.id, title, content);
    const before = await routingOps(client, destination.id);
    const res = await client.post('/v1/install_copy', {
      source_environment_id: source.w.install.id,
      destination_environment_id: destination.id,
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const copy = await client.get(new URL(String(res.headers.location)).pathname);
    assert.equal(copy.body.status, 'completed', JSON.stringify(copy.body));
    // The destination's routing ran again after the copy (one apply_routing, completed).
    assert.equal((await newRoutingOp(client, destination.id, before)).status, 'completed');

    const rows = await host.rows(destination.id, 'wp_posts');
    const copied = String(rows.find((r) => Number(r.ID) === postId)?.post_content);
    assert.equal(
      copied,
      [
        `<a href="${target}/about/">primary</a>`,
        `<a href="${target}/old/">redirecting</a>`,
        `<a href="${target}/secure/">secure</a>`,
        `<img src="//${destinationName}:${tlsPort}/x.png">`,
        `<a href="http://${sourcePrimary}.elsewhere.test/">other host</a>`,
        `<a href="http://${sourcePrimary}:1/">other port</a>`,
      ].join(' '),
    );
    assert.deepEqual(await siteUrls(destination.id), { home: target, siteurl: target });
    // Served on the destination's primary over HTTPS, with its links.
    const page = await until(
      () => getTls(tlsPort, destinationName, pki.root.certPem, `/?p=${postId}`),
      (r) => r?.status === 200 && r.body.includes(title),
    );
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 300));
    assert.ok(page?.body.includes(`${target}/about/`));
  });

  it("R1-R3 issue 21: a restore of a backup made before the primary domain was added is routed again: WordPress's home follows the primary, not the backup's", async () => {
    const s = await served();
    const client = s.w.owner.client;
    const made = await client.post(`/v1/installs/${s.w.install.id}/backups`, {
      description: 'before the domain',
      notification_emails: [],
    });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    await t.runJobs();
    const name = uniqueDomain('rp');
    await addServed(client, s.w.install.id, name, { primary: true });
    await t.runJobs();
    assert.equal((await siteUrls(s.w.install.id)).home, url(name));
    const before = await routingOps(client, s.w.install.id);
    const res = await client.post(`/v1/installs/${s.w.install.id}/backups/${made.body.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const restore = await client.get(new URL(String(res.headers.location)).pathname);
    assert.equal(restore.body.status, 'completed', JSON.stringify(restore.body));
    assert.equal((await newRoutingOp(client, s.w.install.id, before)).status, 'completed');
    // The backup held the default name's URL; routing gave the primary back.
    assert.deepEqual(await siteUrls(s.w.install.id), { home: url(name), siteurl: url(name) });
    const page = await until(
      () => get(port, name),
      (r) => r?.status === 200 && /Hello world!/.test(r.body),
    );
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 300));
    assert.ok(page?.body.includes(`${url(name)}/`), 'links use the primary domain');
  });
});
