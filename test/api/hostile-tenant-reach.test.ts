// test-db: postgres (the subject is the local web tier's file modes and system users, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';
import { type LocalDriverProbe, localHosting, MARIADB_URL } from '../support/local-hosting.js';
import { runCli } from '../support/process.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 28 findings 4, 5 (file modes) and 10 (GRANT wildcard, userdel), issue 29 defect 2: what the
// PHP of one install (any plugin: code run as the install's own system user) can reach of another
// install, of the control plane and of the host. One web tier for the file, two installs reused.
// The process runs with the umask `hostplane serve`/`worker` set (main.ts), so every file the driver
// makes here is made as in production.
process.umask(0o077);

const TOOLS = [
  '/usr/sbin/nginx',
  '/usr/sbin/php-fpm8.2',
  '/usr/bin/php8.2',
  '/usr/share/wordpress/wp-settings.php',
];
const missing = TOOLS.filter((p) => !existsSync(p));
const slugOf = (id: string) => `hp_${id.replace(/-/g, '')}`;

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

async function until(
  port: number,
  host: string,
  ok: (r: Awaited<ReturnType<typeof get>>) => boolean,
  p = '/',
) {
  let last: Awaited<ReturnType<typeof get>> = null;
  for (let i = 0; i < 50; i++) {
    last = await get(port, host, p);
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

/**
 * What PHP run as `user` (runuser, the PHP CLI: no pool setting applies, only the uid) gets from each
 * probe: `list` (scandir), `read` (file_get_contents) or `connect` (a unix socket): 'DENIED' or 'OK'.
 */
function reach(user: string, probes: { kind: 'list' | 'read' | 'connect' | 'link'; path: string }[]) {
  const code = `
$out = [];
foreach (json_decode(getenv('HP_PROBES'), true) as $p) {
  $r = match ($p['kind']) {
    'list' => @scandir($p['path']),
    'read' => @file_get_contents($p['path'], false, null, 0, 64),
    'connect' => @stream_socket_client('unix://' . $p['path'], $errno, $errstr, 2),
    // A link planted where root writes (a lock, a flag file) would turn root's write elsewhere.
    'link' => @symlink('/etc/passwd', $p['path']),
  };
  $out[$p['kind'] . ' ' . $p['path']] = $r === false ? 'DENIED' : 'OK';
}
echo json_encode($out);`;
  const text = execFileSync('runuser', ['-u', user, '--', '/usr/bin/php8.2', '-r', code], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HP_PROBES: JSON.stringify(probes) },
    encoding: 'utf8',
    cwd: '/',
  });
  return JSON.parse(text) as Record<string, string>;
}

describe('issue 28 findings 4, 5, 10 and issue 29 defect 2: a hostile tenant reaches nothing of another', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  const port = await freePort();
  const host = await localHosting({ autoCleanup: false });
  const t = await buildTestApp({
    env: { ...host.env, LOCAL_WEB: 'on', HOSTING_HTTP_PORT: String(port) },
  });
  const f = factories(t);
  const web = path.join(host.root, 'web');
  const seen: string[] = [];
  const children: ChildProcess[] = [];
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-hostile-'));

  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await stopWebTier(web, seen);
    await host.cleanup();
    await fs.rm(tmp, { recursive: true, force: true });
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

  const a = await served();
  const b = await served();
  const aUser = userOf(a.w.install.id);
  const bUser = userOf(b.w.install.id);
  const aPaths = host.paths(a.w.install.id);

  it("issue 28 finding 4: B's PHP lists neither backups/ nor web/sites/, reads none of A's backup, wp-config.php, document root, access log or pool socket; nginx still serves A", async () => {
    const made = await a.w.owner.client.post(`/v1/installs/${a.w.install.id}/backups`, {
      description: 'what B must not read',
      notification_emails: [],
    });
    assert.equal(made.status, 202, JSON.stringify(made.body));
    await t.runJobs();
    const backup = await a.w.owner.client.get(`/v1/installs/${a.w.install.id}/backups/${made.body.id}`);
    assert.equal(backup.body.status, 'completed', JSON.stringify(backup.body));
    const [dir] = (await fs.readdir(aPaths.backups)).filter((n) => !n.startsWith('.'));
    assert.ok(dir, 'the backup directory');
    const backupDir = path.join(aPaths.backups, dir);
    assert.ok(await until(port, a.cname, (r) => r?.status === 200), 'A is served (its access log written)');
    const aLog = path.join(web, 'logs', `${slugOf(a.w.install.id)}.access.log`);
    assert.ok(existsSync(aLog));

    const probes = [
      { kind: 'list', path: path.join(host.root, 'backups') },
      { kind: 'list', path: aPaths.backups },
      { kind: 'list', path: path.join(web, 'sites') },
      { kind: 'list', path: path.join(web, 'logs') },
      { kind: 'list', path: path.join(host.root, 'installs') },
      { kind: 'list', path: aPaths.public },
      { kind: 'read', path: path.join(backupDir, 'files.tar.gz') },
      { kind: 'read', path: path.join(backupDir, 'database.sql') },
      { kind: 'read', path: path.join(aPaths.public, 'wp-config.php') },
      { kind: 'read', path: path.join(aPaths.public, 'readme.html') },
      { kind: 'read', path: path.join(aPaths.public, 'index.php') },
      { kind: 'read', path: path.join(web, 'sites', `${slugOf(a.w.install.id)}.conf`) },
      { kind: 'read', path: aLog },
      { kind: 'connect', path: path.join(web, 'run', `${slugOf(a.w.install.id)}.sock`) },
      // Root's machine locks (decision 248) and freeze flags (decision 245) live in web/run.
      { kind: 'link', path: path.join(web, 'run', 'hp-planted.lock') },
      { kind: 'link', path: path.join(web, 'run', `${slugOf(a.w.install.id)}.frozen`) },
    ] as const;
    const byB = reach(bUser, [...probes]);
    const reached = Object.entries(byB).filter(([, v]) => v !== 'DENIED');
    assert.deepEqual(reached, [], `B's PHP reached: ${JSON.stringify(byB, null, 1)}`);
    // The probe works: A's own user reads its own document root and wp-config.php.
    const byA = reach(aUser, [
      { kind: 'read', path: path.join(aPaths.public, 'wp-config.php') },
      { kind: 'list', path: aPaths.public },
      { kind: 'link', path: path.join(aPaths.public, 'hp-probe-link') },
      { kind: 'link', path: path.join(web, 'run', 'hp-planted-by-a.lock') },
    ]);
    assert.deepEqual(Object.values(byA), ['OK', 'OK', 'OK', 'DENIED']);
    await fs.rm(path.join(aPaths.public, 'hp-probe-link'));

    // The tree's modes as the tenant model says (directories 0750, files 0640), backups root-only.
    assert.equal((await fs.stat(aPaths.public)).mode & 0o777, 0o750);
    assert.equal((await fs.stat(path.join(aPaths.public, 'readme.html'))).mode & 0o777, 0o640);
    assert.equal((await fs.stat(path.join(backupDir, 'files.tar.gz'))).mode & 0o777, 0o600);
    assert.equal((await fs.stat(backupDir)).mode & 0o777, 0o700);

    // nginx (www-data, a member of A's group) still serves A's static files and its PHP.
    const readme = await until(port, a.cname, (r) => r?.status === 200, '/readme.html');
    assert.equal(readme?.status, 200);
    assert.match(readme?.body ?? '', /WordPress/);
  });

  it("issue 28 finding 4: A's pool runs with umask 027 and exec-like functions disabled (defence in depth); what it writes nginx serves, B cannot read", async () => {
    const probe = path.join(aPaths.public, 'hp-probe.php');
    await fs.writeFile(
      probe,
      `<?php
$f = __DIR__ . '/wp-content/uploads/hp-upload.txt';
file_put_contents($f, 'uploaded by A');
echo json_encode([
  'umask' => decoct(umask()),
  'shell_exec' => function_exists('shell_exec') && is_callable('shell_exec'),
  'disabled' => ini_get('disable_functions'),
  'mode' => decoct(fileperms($f) & 0777),
]);
`,
    );
    execFileSync('chown', [`${aUser}:${aUser}`, probe]);
    // As the tenant model makes a site's files (0640): nginx opens a script before PHP-FPM runs it
    // (`disable_symlinks` checks the open file), so it must read it through A's group.
    await fs.chmod(probe, 0o640);
    const page = await until(port, a.cname, (r) => r?.status === 200, '/hp-probe.php');
    assert.equal(page?.status, 200, JSON.stringify(page));
    const facts = JSON.parse(page?.body ?? '{}') as Record<string, unknown>;
    assert.equal(facts.umask, '27');
    assert.equal(facts.mode, '640');
    for (const fn of ['exec', 'shell_exec', 'system', 'passthru', 'proc_open', 'popen', 'pcntl_exec'])
      assert.ok(String(facts.disabled).split(',').includes(fn), `${fn} disabled: ${facts.disabled}`);
    const upload = await until(port, a.cname, (r) => r?.status === 200, '/wp-content/uploads/hp-upload.txt');
    assert.equal(upload?.body, 'uploaded by A');
    const byB = reach(bUser, [
      { kind: 'read', path: path.join(aPaths.public, 'wp-content/uploads/hp-upload.txt') },
    ]);
    assert.deepEqual(Object.values(byB), ['DENIED']);
  });

  it("issue 28 finding 4, installs made before the model: at start nginx's user joins their groups and an open document root gets 0750/0640 (as the install's user); nginx still serves them", async () => {
    // A as an earlier version left it: its tree open to others, nginx's user not in its group.
    execFileSync('chmod', ['-R', 'u=rwX,go=rX', aPaths.public]);
    execFileSync('gpasswd', ['--delete', 'www-data', aUser], { stdio: 'ignore' });
    assert.deepEqual(
      Object.values(reach(bUser, [{ kind: 'read', path: path.join(aPaths.public, 'index.php') }])),
      ['OK'],
    );
    await t.app.services.driver.start?.();
    assert.ok(execFileSync('id', ['-nG', 'www-data'], { encoding: 'utf8' }).split(/\s+/).includes(aUser));
    assert.equal((await fs.stat(aPaths.public)).mode & 0o777, 0o750);
    assert.equal((await fs.stat(path.join(aPaths.public, 'index.php'))).mode & 0o777, 0o640);
    assert.deepEqual(
      Object.values(reach(bUser, [{ kind: 'read', path: path.join(aPaths.public, 'index.php') }])),
      ['DENIED'],
    );
    // nginx was reloaded: its new workers read A's files through the group.
    const readme = await until(port, a.cname, (r) => r?.status === 200, '/readme.html');
    assert.equal(readme?.status, 200);
  });

  it("issue 28 finding 5: serve makes DATA_DIR 0700 and B's PHP reads neither its secret-key nor the embedded database; the default HOSTING_ROOT is outside DATA_DIR", async () => {
    // A parent any user may pass, so only DATA_DIR's own mode can refuse.
    await fs.chmod(tmp, 0o711);
    const dataDir = path.join(tmp, 'data');
    await fs.mkdir(dataDir, { mode: 0o755 });
    await fs.chmod(dataDir, 0o755);
    const serve = runCli(['serve'], { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' });
    children.push(serve.child);
    try {
      await serve.waitFor(/Hostplane is serving/, 90_000);
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
    assert.equal((await fs.stat(dataDir)).mode & 0o777, 0o700);
    const byB = reach(bUser, [
      { kind: 'list', path: dataDir },
      { kind: 'read', path: path.join(dataDir, 'secret-key') },
      { kind: 'read', path: path.join(dataDir, 'admin-token') },
      { kind: 'list', path: path.join(dataDir, 'pg') },
      { kind: 'read', path: path.join(dataDir, 'pg', 'PG_VERSION') },
    ]);
    assert.deepEqual(
      Object.entries(byB).filter(([, v]) => v !== 'DENIED'),
      [],
      JSON.stringify(byB),
    );
    assert.ok(existsSync(path.join(dataDir, 'pg', 'PG_VERSION')), 'the probe read a file that is there');
  });

  it("issue 28 finding 10: the install's database user cannot create a database its GRANT's `_` would match (hp0<hex>)", async () => {
    const driver = t.app.services.driver as unknown as LocalDriverProbe;
    const conn = await host.asInstall(driver, a.w.install.id);
    const lookalike = slugOf(a.w.install.id).replace('hp_', 'hp0');
    try {
      await assert.rejects(conn.query(`CREATE DATABASE \`${lookalike}\``), /denied/i);
      // Its own database still works.
      await conn.query('CREATE TABLE hp_probe (id INT)');
      await conn.query('DROP TABLE hp_probe');
    } finally {
      await conn.end();
      await host.admin.query(`DROP DATABASE IF EXISTS \`${lookalike}\``);
    }
  });

  it('issue 28 finding 10: deleting an install whose user still runs a process completes: the process is stopped, the user removed', async () => {
    const c = await served();
    const user = userOf(c.w.install.id);
    const uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim());
    // A process of the install's user (what a plugin's background worker would leave running).
    const sleeper = spawn('/usr/bin/sleep', ['600'], { stdio: 'ignore', cwd: '/', uid, gid });
    children.push(sleeper);
    const gone = new Promise((resolve) => sleeper.on('exit', resolve));
    const res = await c.w.owner.client.delete(`/v1/installs/${c.w.install.id}`);
    assert.equal(res.status, 204);
    await t.runJobs();
    const ops = await c.w.owner.client.get(`/v1/installs/${c.w.install.id}/operations`);
    const failed = t.jobLog
      .filter((l) => l.msg === 'job failed')
      .map((l) => JSON.stringify(l.obj).slice(0, 400));
    assert.throws(
      () => execFileSync('id', ['-u', user], { stdio: 'ignore' }),
      `the user is gone; ops ${JSON.stringify(ops.body).slice(0, 800)}; failures ${failed.join('\n')}`,
    );
    await gone;
    assert.equal(
      existsSync(c.w.install.id && path.join(host.root, 'installs', slugOf(c.w.install.id))),
      false,
    );
  });

  it('issue 29 defect 2: a HOSTING_ROOT under a directory the install users cannot pass: doctor names it and the fix; provisioning fails at once saying why', async () => {
    const closed = await fs.mkdtemp(path.join(tmp, 'closed-'));
    assert.equal((await fs.stat(closed)).mode & 0o777, 0o700);
    const root = path.join(closed, 'hosting');
    const doctor = runCli(['doctor'], {
      DATA_DIR: path.join(tmp, 'doctor-data'),
      HOSTING_DRIVER: 'local',
      LOCAL_WEB: 'on',
      HOSTING_ROOT: root,
      MARIADB_URL,
    });
    assert.equal(await doctor.exited, 1, doctor.output());
    assert.match(doctor.output(), new RegExp(`FAIL.*${closed}.*chmod o\\+x ${closed}`));
    // serve (and worker) with the web tier refuse to start with the same reason.
    const serve = runCli(['serve'], {
      DATA_DIR: path.join(tmp, 'serve-data'),
      PORT: '0',
      HOSTING_DRIVER: 'local',
      LOCAL_WEB: 'on',
      HOSTING_ROOT: root,
      MARIADB_URL,
    });
    children.push(serve.child);
    assert.equal(await serve.exited, 1, serve.output());
    assert.match(
      serve.output(),
      new RegExp(`not ready.*[\\s\\S]*${closed} \\(0700\\).*chmod o\\+x ${closed}`),
    );

    const closedPort = await freePort();
    const t2 = await buildTestApp({
      env: { ...host.env, HOSTING_ROOT: root, LOCAL_WEB: 'on', HOSTING_HTTP_PORT: String(closedPort) },
    });
    try {
      const f2 = factories(t2);
      const w = await f2.world();
      seen.push(w.install.id);
      host.paths(w.install.id);
      await t2.runJobs();
      const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
      const op = (ops.body.results as Json[]).find((o) => o.type === 'provision_install');
      assert.equal(op?.status, 'failed', JSON.stringify(ops.body));
      assert.match(String(op?.error), new RegExp(`${closed}.*chmod o\\+x`));
      // Ended at once: no attempt spent on a retry that could not change it.
      assert.deepEqual(
        t2.jobLog.filter((l) => l.msg === 'job failed').map((l) => JSON.stringify(l.obj).slice(0, 300)),
        [],
      );
    } finally {
      await t2.close();
    }
  });
});
