import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { operationOf, readyWorld } from '../support/jobs.js';
import { localHosting } from '../support/local-hosting.js';

// Issue 21 (first slice): HOSTING_DRIVER=local with LOCAL_WEB=on serves installs with Debian's nginx,
// php8.2-fpm and wordpress (scripts/test.sh installs them). nginx and PHP-FPM run from this file's
// own HOSTING_ROOT on a free port and are stopped after it.
const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** GET / on nginx with the install's host name: status and body, or null when nginx closed the connection. */
function get(port: number, host: string, urlPath = '/'): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, headers: { host: `${host}:${port}` }, timeout: 30_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', () => resolve(null));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** Asks until `ok` holds (a reload's new workers take a moment), answering the last response. */
async function until(
  port: number,
  host: string,
  ok: (r: Awaited<ReturnType<typeof get>>) => boolean,
  urlPath = '/',
) {
  let last: Awaited<ReturnType<typeof get>> = null;
  for (let i = 0; i < 50; i++) {
    last = await get(port, host, urlPath);
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

const slugOf = (id: string) => `hp_${id.replace(/-/g, '')}`;
const userOf = (id: string) => `hp${id.replace(/-/g, '').slice(0, 30)}`;

describe('local driver web tier (issue 21)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const port = await freePort();
  const host = await localHosting({ autoCleanup: false });
  const t = await buildTestApp({
    env: {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(port),
      PUBLIC_URL: 'https://api.hostplane.test',
    },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];

  after(async () => {
    // Stop what this file started (by its pid files), then its system users and the rest.
    for (const pidFile of ['nginx.pid', 'php-fpm.pid']) {
      const pid = Number(await fs.readFile(path.join(web, 'run', pidFile), 'utf8').catch(() => ''));
      if (pid > 1) {
        try {
          process.kill(pid, 'SIGQUIT');
        } catch {}
      }
    }
    for (const id of seen) {
      try {
        execFileSync('userdel', [userOf(id)], { stdio: 'ignore' });
      } catch {}
    }
    await new Promise((r) => setTimeout(r, 300));
    await host.cleanup();
  });

  async function served() {
    const w = await readyWorld(t, f);
    seen.push(w.install.id);
    host.paths(w.install.id);
    const install = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    if (install.body.status !== 'active') {
      const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
      assert.fail(`not provisioned: ${JSON.stringify(ops.body).slice(0, 1500)}`);
    }
    return { w, cname: install.body.cname as string, install: install.body as Json };
  }

  it('issue 21: a production install serves WordPress on its cname (site title, first post); deleting it stops that', async () => {
    const { w, cname, install } = await served();
    assert.equal(install.wp_version, '6.1.9');
    assert.match(String(install.php_version), /^8\.2\.\d+$/);
    const page = await until(port, cname, (r) => r?.status === 200);
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(w.site.name), 'the site title is on the front page');
    assert.match(page?.body ?? '', /Hello world!/);
    // A host nginx does not serve: the connection is closed (the default server's 444).
    assert.equal(await get(port, `nobody.${cname}`), null);
    // The install's own user, pool and wp-config.php (not readable by others).
    const wpConfig = await fs.stat(path.join(host.paths(w.install.id).public, 'wp-config.php'));
    assert.equal(wpConfig.mode & 0o777, 0o640);
    assert.ok(existsSync(path.join(web, 'pools', `${slugOf(w.install.id)}.conf`)));

    const res = await w.owner.client.delete(`/v1/installs/${w.install.id}`);
    assert.equal(res.status, 204);
    await t.runJobs();
    const gone = await until(port, cname, (r) => r === null || r.status === 404);
    assert.ok(gone === null || gone.status === 404, `still served: ${gone?.status}`);
    assert.equal(existsSync(path.join(web, 'sites', `${slugOf(w.install.id)}.conf`)), false);
    assert.equal(existsSync(path.join(web, 'pools', `${slugOf(w.install.id)}.conf`)), false);
    assert.throws(() => execFileSync('id', ['-u', userOf(w.install.id)], { stdio: 'ignore' }));
  });

  it('issue 21: a configuration that fails nginx -t fails the provisioning and the served site still answers', async () => {
    const first = await served();
    assert.equal((await until(port, first.cname, (r) => r?.status === 200))?.status, 200);
    // Fault: a broken file among the server blocks (as a hand edit would leave it).
    const broken = path.join(web, 'sites', 'zz-broken.conf');
    await fs.writeFile(broken, 'server { listen oops; \n');
    try {
      const w2 = await f.install(first.w.owner.client, first.w.account.id, first.w.site.id, 'staging');
      seen.push(w2.id);
      host.paths(w2.id);
      await t.runJobs();
      const second = await first.w.owner.client.get(`/v1/installs/${w2.id}`);
      assert.equal(second.body.status, 'pending');
      const ops = await first.w.owner.client.get(`/v1/installs/${w2.id}/operations`);
      assert.equal(ops.body.results[0].status, 'failed');
      assert.match(ops.body.results[0].error, /nginx refused the new configuration, the running one is kept/);
      assert.equal(existsSync(path.join(web, 'sites', `${slugOf(w2.id)}.conf`)), false);
      // nginx kept its running configuration: the first site still answers.
      const page = await get(port, first.cname);
      assert.equal(page?.status, 200);
      assert.match(page?.body ?? '', /Hello world!/);
    } finally {
      await fs.rm(broken, { force: true });
    }
  });

  it("issue 21: two installs: one's PHP cannot read the other's wp-config.php (nor /etc/passwd)", async () => {
    const a = await served();
    const b = await served();
    const aPublic = host.paths(a.w.install.id).public;
    const bConfig = path.join(host.paths(b.w.install.id).public, 'wp-config.php');
    assert.ok(existsSync(bConfig));
    // A small PHP file in A's document root, owned by A's user (as anything A's WordPress writes).
    const probe = path.join(aPublic, 'probe.php');
    const read = (file: string) =>
      `echo ${JSON.stringify(file)}, ': ', @file_get_contents(${JSON.stringify(file)}) === false ? 'DENIED' : 'OK', "\\n";`;
    await fs.writeFile(
      probe,
      `<?php\n${read(bConfig)}\n${read('/etc/passwd')}\n${read(path.join(aPublic, 'wp-config.php'))}\n`,
    );
    execFileSync('chown', [`${userOf(a.w.install.id)}:${userOf(a.w.install.id)}`, probe]);
    const page = await until(port, a.cname, (r) => r?.status === 200, '/probe.php');
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(`${bConfig}: DENIED`), page?.body);
    assert.match(page?.body ?? '', /\/etc\/passwd: DENIED/);
    // The probe works: A's PHP reads A's own wp-config.php.
    assert.match(page?.body ?? '', /wp-config\.php: OK\s*$/);
    // B's host does not serve A's probe.
    assert.notEqual((await get(port, b.cname, '/probe.php'))?.status, 200);
  });

  it('issue 21: after a backup and a restore the site still serves WordPress (tree owned by the install, its wp-config.php 0640)', async () => {
    const { w, cname } = await served();
    const p = host.paths(w.install.id);
    assert.equal((await until(port, cname, (r) => r?.status === 200))?.status, 200);
    const made = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'before restoring',
      notification_emails: [],
    });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    await t.runJobs();
    const backup = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${made.body.id}`);
    assert.equal(backup.body.status, 'completed', JSON.stringify(backup.body));
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${made.body.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const restore = await operationOf(w.owner.client, res);
    assert.equal(restore.status, 'completed', JSON.stringify(restore));
    const page = await until(port, cname, (r) => r?.status === 200 && /Hello world!/.test(r.body));
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
    assert.ok(page?.body.includes(w.site.name), 'the site title is on the front page');
    const uid = Number(execFileSync('id', ['-u', userOf(w.install.id)], { encoding: 'utf8' }).trim());
    const config = await fs.stat(path.join(p.public, 'wp-config.php'));
    assert.equal(config.mode & 0o777, 0o640);
    assert.equal(config.uid, uid);
    assert.equal((await fs.stat(p.public)).uid, uid);
    assert.equal((await fs.stat(path.join(p.public, 'wp-content'))).uid, uid);
  });

  it('issue 21: a copy production -> staging keeps the staging wp-config.php (its own credentials) and staging still serves on its own host', async () => {
    const prod = await served();
    const stagingInstall = await f.install(prod.w.owner.client, prod.w.account.id, prod.w.site.id, 'staging');
    seen.push(stagingInstall.id);
    const to = host.paths(stagingInstall.id);
    await t.runJobs();
    const staging = await prod.w.owner.client.get(`/v1/installs/${stagingInstall.id}`);
    assert.equal(staging.body.status, 'active', JSON.stringify(staging.body));
    const stagingHost = staging.body.cname as string;
    assert.equal((await until(port, stagingHost, (r) => r?.status === 200))?.status, 200);
    const ownConfig = await fs.readFile(path.join(to.public, 'wp-config.php'), 'utf8');
    // Files and the posts (the options, with the site's URLs, stay the destination's: no URL rewrite here).
    const res = await prod.w.owner.client.post('/v1/install_copy', {
      source_environment_id: prod.w.install.id,
      destination_environment_id: stagingInstall.id,
      custom_options: { include_files: true, db_tables: ['wp_posts'] },
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(prod.w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    assert.equal(await fs.readFile(path.join(to.public, 'wp-config.php'), 'utf8'), ownConfig);
    const uid = Number(execFileSync('id', ['-u', userOf(stagingInstall.id)], { encoding: 'utf8' }).trim());
    const config = await fs.stat(path.join(to.public, 'wp-config.php'));
    assert.equal(config.mode & 0o777, 0o640);
    assert.equal(config.uid, uid);
    assert.equal((await fs.stat(path.join(to.public, 'wp-content'))).uid, uid);
    const page = await until(port, stagingHost, (r) => r?.status === 200 && /Hello world!/.test(r.body));
    assert.equal(page?.status, 200, JSON.stringify(page).slice(0, 500));
  });
});
