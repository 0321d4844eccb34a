// test-db: postgres (the subject is what `npm start` serves with the local web tier, not the database)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { cloneDatabase } from '../support/databases.js';
import type { Json } from '../support/harness.js';
import { localHosting } from '../support/local-hosting.js';
import { runCli } from '../support/process.js';
import { freePort, stopWebTier } from '../support/web-tier.js';

// Issue 29 defect 8: `hostplane serve` (what `npm start` runs) with HOSTING_DRIVER=local and
// LOCAL_WEB=on makes the demo account on its first start; its install must be what the API says:
// provisioned by the driver, and served by nginx once it is `active`.
const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));

/** GET on nginx with a Host header: status and body, or null when nginx closed the connection. */
function get(port: number, host: string): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/', headers: { host: `${host}:${port}` }, timeout: 30_000 },
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

describe('npm start with the local web tier: the demo install (issue 29 defect 8)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const port = await freePort();
  const host = await localHosting({ autoCleanup: false });
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-demo-'));
  const clone = await cloneDatabase();
  await clone.database.close();
  const seen: string[] = [];
  const server = runCli(['serve'], {
    ...host.env,
    LOCAL_WEB: 'on',
    HOSTING_HTTP_PORT: String(port),
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: clone.url ?? '',
  });

  after(async () => {
    server.child.kill('SIGTERM');
    await Promise.race([server.exited, new Promise((r) => setTimeout(r, 10_000))]);
    server.child.kill('SIGKILL');
    await stopWebTier(path.join(host.root, 'web'), seen);
    await host.cleanup();
    await clone.drop();
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it('issue 29 defect 8: the demo install is provisioned by the driver: pending until then, and once active nginx serves it', async () => {
    const [, username, password, url] = await server.waitFor(/curl -u '([^:]+):([^']+)' '([^']+)'/);
    const base = new URL(url ?? '').origin;
    const accountId = new URL(url ?? '').searchParams.get('account_id');
    const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    const api = async (p: string): Promise<Json> => {
      const res = await fetch(`${base}${p}`, { headers: { authorization } });
      assert.equal(res.status, 200, p);
      return res.json();
    };
    const list = await api(`/v1/installs?account_id=${accountId}`);
    assert.equal(list.count, 1, JSON.stringify(list));
    const demo = list.results[0] as Json;
    seen.push(demo.id);
    host.paths(demo.id);
    assert.equal(demo.name, 'demosite');
    // Whenever the API says active, nginx serves it (polled until active, with a deadline).
    const deadline = Date.now() + 180_000;
    let install = await api(`/v1/installs/${demo.id}`);
    while (install.status !== 'active' && Date.now() < deadline) {
      assert.equal(install.status, 'pending');
      await new Promise((r) => setTimeout(r, 500));
      install = await api(`/v1/installs/${demo.id}`);
    }
    assert.equal(install.status, 'active', server.output().slice(-3000));
    const page = await get(port, String(install.cname));
    assert.equal(page?.status, 200, `${JSON.stringify(page).slice(0, 300)}\n${server.output().slice(-2000)}`);
    assert.ok(page?.body.includes('Demo Site'), 'the demo site title is on the front page');
    assert.equal(install.wp_version, '6.1.9', "the version the driver read from the install's files");
    // Its provisioning was a real operation of the install, completed.
    const ops = await api(`/v1/installs/${demo.id}/operations`);
    const provision = (ops.results as Json[]).find((op) => op.type === 'provision_install');
    assert.equal(provision?.status, 'completed', JSON.stringify(ops.results));
  });
});
