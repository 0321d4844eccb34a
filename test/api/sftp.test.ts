// test-db: postgres (the subject is Hostplane's sshd, nginx and the install users, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Sshd } from '../../src/drivers/local/sshd.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { operationOf, readyInstall, readyWorld } from '../support/jobs.js';
import { checksums, localHosting } from '../support/local-hosting.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 31: SFTP to each install through Hostplane's own sshd (drivers/local/sshd.ts) with keys from
// the control plane (modules/ssh-access), driven with Debian's openssh-client in batch mode. One web
// tier and three installs for the whole file: A and A2 in one account, B in another.
const TOOLS = ['/usr/sbin/sshd', '/usr/bin/ssh', '/usr/bin/sftp', '/usr/bin/curl', '/usr/sbin/nginx'];
const missing = TOOLS.filter((p) => !existsSync(p));
// sshd chroots only below directories root owns and nobody else may write (not /tmp).
const PARENT = '/var/lib/hostplane-test';

/** What a client run printed and how it ended. */
interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runTool(command: string, args: string[], stdin = '', timeoutMs = 30_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(
      command,
      args,
      { timeout: timeoutMs, env: { PATH: '/usr/bin:/bin' } },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
    child.stdin?.end(stdin);
  });
}

/** GET on nginx with the install's host name: status and body, or null when the connection closed. */
function get(port: number, host: string, urlPath: string): Promise<{ status: number; body: string } | null> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, headers: { host: `${host}:${port}` }, timeout: 10_000 },
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

/** Polls `check` until it holds or the deadline passes; answers whether it held. */
async function within(ms: number, check: () => Promise<boolean> | boolean): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('SSH and SFTP to installs (issue 31)', {
  skip: missing.length > 0 && `missing ${missing.join(', ')}`,
}, async () => {
  if (missing.length > 0) return;
  await fs.mkdir(PARENT, { recursive: true, mode: 0o755 });
  const [httpPort, sshPort] = [await freePort(), await freePort()];
  const host = await localHosting({ autoCleanup: false, parent: PARENT });
  const t = await buildTestApp({
    env: {
      ...host.env,
      LOCAL_WEB: 'on',
      HOSTING_HTTP_PORT: String(httpPort),
      SSH_PORT: String(sshPort),
      SSH_ADDRESS: '127.0.0.1',
    },
  });
  const f = factories(t);
  const keysDir = await fs.mkdtemp(path.join(PARENT, 'keys-'));
  const installIds: string[] = [];
  const open: ChildProcess[] = [];
  const planted: string[] = [];
  const services = t.app.services;
  const sshd = services.sshAccess && (services.driver as unknown as { sshd: Sshd }).sshd;
  assert.ok(
    sshd && services.sshAccess,
    'SSH_PORT gives the local driver an sshd and the control plane its gateway',
  );

  after(async () => {
    for (const child of open) child.kill('SIGKILL');
    await services.sshAccess?.close();
    for (const session of await sshd.sessions()) await sshd.endSession(session);
    await sshd.stop();
    for (const dir of planted) await fs.rm(dir, { recursive: true, force: true });
    await stopWebTier(path.join(host.root, 'web'), installIds);
    await within(3000, async () => !existsSync(sshd.paths.pid) || !(await sshdRunning()));
    // The key lookup's account `hpsshauth` stays (a system account, as a package's would): another
    // file's sshd may be asking with it right now.
    await t.close();
    await host.cleanup();
    await fs.rm(keysDir, { recursive: true, force: true });
  });
  const sshdRunning = async () => {
    const pid = Number(await fs.readFile(sshd.paths.pid, 'utf8').catch(() => ''));
    if (!(pid > 1)) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  /** A fresh ed25519 key pair (the private key's file, the public line). */
  async function keygen(name: string) {
    const file = path.join(keysDir, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `${name}@hostplane.test`, '-f', file]);
    return { file, line: (await fs.readFile(`${file}.pub`, 'utf8')).trim() };
  }

  const clientOptions = (key: string) => [
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'BatchMode=yes',
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'LogLevel=ERROR',
    '-i',
    key,
  ];
  /** `sftp -b -` with `commands` as the batch: exit 0 only when every command worked. */
  const sftp = (key: string, login: string, commands: string) =>
    runTool(
      'sftp',
      ['-b', '-', ...clientOptions(key), '-P', String(sshPort), `${login}@127.0.0.1`],
      commands,
    );
  const ssh = (key: string, login: string, args: string[], extra: string[] = []) =>
    runTool(
      'ssh',
      [...clientOptions(key), ...extra, '-p', String(sshPort), `${login}@127.0.0.1`, ...args],
      '',
      15_000,
    );

  /**
   * An SFTP session kept open: `ssh -s … sftp` with its stdin left open, which exits as soon as the
   * server closes the connection (an `sftp` client would notice only at its next command). Opened
   * once the server answered SSH_FXP_INIT with SSH_FXP_VERSION.
   */
  async function session(key: string, login: string) {
    const child = spawn(
      'ssh',
      [...clientOptions(key), '-s', '-p', String(sshPort), `${login}@127.0.0.1`, 'sftp'],
      {
        stdio: ['pipe', 'pipe', 'ignore'],
        env: { PATH: '/usr/bin:/bin' },
      },
    );
    open.push(child);
    let out = Buffer.alloc(0);
    child.stdout.on('data', (c: Buffer) => {
      out = Buffer.concat([out, c]);
    });
    let exited = false;
    child.on('exit', () => {
      exited = true;
    });
    // uint32 length 5, SSH_FXP_INIT (1), version 3.
    child.stdin.write(Buffer.from([0, 0, 0, 5, 1, 0, 0, 0, 3]));
    assert.ok(await within(15_000, () => out.length >= 5 || exited), 'the session answered or ended');
    assert.equal(exited, false, `the session of ${login} was refused`);
    assert.equal(out[4], 2, 'SSH_FXP_VERSION');
    return { child, ended: () => exited };
  }

  // The file's installs: A and A2 (one account), B (another), all served before the first test.
  let w: Awaited<ReturnType<typeof readyWorld>>;
  let wb: Awaited<ReturnType<typeof readyWorld>>;
  let a2: Json;
  let loginA: string;
  let loginA2: string;
  let loginB: string;
  let sysA: string;
  let cnameA: string;
  let ownerKey: Awaited<ReturnType<typeof keygen>>;
  before(async () => {
    w = await readyWorld(t, f);
    a2 = await readyInstall(t, f, w);
    wb = await readyWorld(t, f);
    for (const id of [w.install.id, a2.id as string, wb.install.id]) {
      installIds.push(id);
      host.paths(id);
      const res = await w.owner.client.get(`/v1/installs/${id}`);
      if (res.status === 200) assert.equal(res.body.status, 'active', JSON.stringify(res.body));
    }
    // Decision 185: users log in as the install's name (its system user `hp<30 hex>` works too).
    [loginA, loginA2, loginB] = [w.install.name, a2.name as string, wb.install.name];
    sysA = userOf(w.install.id);
    cnameA = (await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.cname as string;
    // What `hostplane serve` does at start: the driver's daemons (nginx, PHP-FPM, sshd), then the gateway.
    await services.driver.start?.();
    await services.sshAccess?.start();
    ownerKey = await keygen('owner');
    const res = await w.owner.client.post('/v1/ssh_keys', { public_key: ownerKey.line });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });

  it("issue 31: the owner's key puts a file over SFTP into the document root; it is the install user's, 0640 (umask 027), and nginx serves it", async () => {
    const local = path.join(keysDir, 'hello.txt');
    await fs.writeFile(local, 'hello over sftp\n', { mode: 0o644 });
    const put = await sftp(ownerKey.file, loginA, `put ${local} hello.txt\nls -l\n`);
    assert.equal(put.code, 0, put.stderr);
    const file = path.join(host.paths(w.install.id).public, 'hello.txt');
    const st = await fs.lstat(file);
    const uid = Number(execFileSync('id', ['-u', sysA]).toString().trim());
    assert.equal(st.uid, uid, 'the file is the install user’s, not root’s');
    assert.equal(Number(execFileSync('id', ['-u', loginA]).toString().trim()), uid, 'the name is that uid');
    assert.equal(st.gid, Number(execFileSync('id', ['-g', sysA]).toString().trim()));
    assert.equal(st.mode & 0o777, 0o640);
    // Served by nginx once readable by its workers (the tenant model's group read; here: made public).
    const chmod = await sftp(ownerKey.file, loginA, 'chmod 644 hello.txt\n');
    assert.equal(chmod.code, 0, chmod.stderr);
    const served = await get(httpPort, cnameA, '/hello.txt');
    assert.equal(served?.status, 200, JSON.stringify(served));
    assert.equal(served?.body, 'hello over sftp\n');
    // One key opens every install its user may reach: A2 of the same account too; and the install's
    // system user name opens the same install (decision 185).
    assert.equal((await sftp(ownerKey.file, loginA2, 'pwd\n')).code, 0);
    const bySystemName = await sftp(ownerKey.file, sysA, 'ls hello.txt\n');
    assert.equal(bySystemName.code, 0, bySystemName.stderr);
  });

  it('issue 31 escape matrix as install A: B’s wp-config.php, / outside the chroot, ssh -L to MariaDB, -W, agent forwarding, a shell command, a symlink to B through nginx: each refused', async () => {
    const bRoot = path.join(host.root, 'installs', `hp_${wb.install.id.replace(/-/g, '')}`);
    const bConfig = path.join(bRoot, 'public', 'wp-config.php');
    assert.ok(existsSync(bConfig));
    const sink = path.join(keysDir, 'stolen');
    for (const target of [
      bConfig,
      `/../hp_${wb.install.id.replace(/-/g, '')}/public/wp-config.php`,
      '/etc/passwd',
    ]) {
      const res = await sftp(ownerKey.file, loginA, `get ${target} ${sink}\n`);
      assert.notEqual(res.code, 0, `read ${target}`);
      assert.equal(existsSync(sink), false);
    }
    const list = await sftp(ownerKey.file, loginA, 'ls /\n');
    assert.notEqual(list.code, 0, 'listing / outside the document root');
    assert.match(list.stderr, /Permission denied/);

    // ssh -L: the forward is refused, so MariaDB's greeting never arrives through it.
    const local = await freePort();
    const forward = spawn(
      'ssh',
      [
        ...clientOptions(ownerKey.file),
        '-N',
        '-L',
        `${local}:127.0.0.1:3306`,
        '-p',
        String(sshPort),
        `${loginA}@127.0.0.1`,
      ],
      { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } },
    );
    open.push(forward);
    const listening = await within(
      10_000,
      () =>
        new Promise<boolean>((resolve) => {
          const s = net.connect(local, '127.0.0.1');
          s.on('connect', () => {
            s.destroy();
            resolve(true);
          });
          s.on('error', () => resolve(false));
        }),
    );
    assert.ok(listening, 'ssh -L listened locally');
    const greeting = await new Promise<string>((resolve) => {
      let data = '';
      const s = net.connect(local, '127.0.0.1');
      s.on('data', (c) => {
        data += c.toString('latin1');
      });
      s.on('close', () => resolve(data));
      s.on('error', () => resolve(data));
      setTimeout(() => s.destroy(), 5000);
    });
    forward.kill();
    assert.equal(greeting, '', 'nothing of MariaDB came through the tunnel');
    const stdio = await ssh(ownerKey.file, loginA, [], ['-W', '127.0.0.1:3306']);
    assert.notEqual(stdio.code, 0);
    assert.doesNotMatch(stdio.stdout, /mysql|MariaDB/i);
    assert.match(stdio.stderr, /administratively prohibited|open failed|forwarding failed/);
    // A command is not run: the session is SFTP whatever is asked (no shell, no scp, no rsync -e).
    const command = await ssh(ownerKey.file, loginA, ['id; cat /etc/passwd'], ['-T']);
    assert.doesNotMatch(command.stdout, /uid=|root:x:0/);
    // Agent and X11 forwarding, tunnels, user environment: off in the running configuration.
    const effective = execFileSync('/usr/sbin/sshd', [
      '-T',
      '-f',
      sshd.paths.config,
      '-C',
      `user=${loginA},host=client,addr=127.0.0.1`,
    ]).toString();
    for (const line of [
      'allowagentforwarding no',
      'allowtcpforwarding no',
      'allowstreamlocalforwarding no',
      'x11forwarding no',
      'permittunnel no',
      'disableforwarding yes',
      'permituserenvironment no',
      'passwordauthentication no',
      'authorizedkeysfile none',
      'permitrootlogin no',
    ])
      assert.ok(effective.includes(`\n${line}\n`), `sshd -T: ${line}`);
    const agent = await ssh(ownerKey.file, loginA, ['true'], ['-A', '-o', 'ForwardAgent=yes', '-T']);
    assert.doesNotMatch(agent.stdout, /SSH_AUTH_SOCK/);

    // A symlink in A's document root to B's files, fetched through nginx: not B's content.
    for (const [name, target] of [
      ['leak-config.txt', bConfig],
      ['leak-readme.html', path.join(bRoot, 'public', 'readme.html')],
      ['leak-rel.html', `../../hp_${wb.install.id.replace(/-/g, '')}/public/readme.html`],
    ] as const) {
      const made = await sftp(ownerKey.file, loginA, `symlink ${target} ${name}\n`);
      assert.equal(made.code, 0, made.stderr);
      const res = await get(httpPort, cnameA, `/${name}`);
      assert.notEqual(res?.status, 200, `${name} -> ${target}: ${res?.body.slice(0, 200)}`);
      assert.doesNotMatch(res?.body ?? '', /DB_PASSWORD|WordPress/);
    }
  });

  it('issue 31: a key of a user of another account opens nothing here; a planted authorized_keys in the install user’s home is ignored; unknown logins are refused', async () => {
    const otherKey = await keygen('other-account');
    const res = await wb.owner.client.post('/v1/ssh_keys', { public_key: otherKey.line });
    assert.equal(res.status, 201);
    assert.equal((await sftp(otherKey.file, loginB, 'pwd\n')).code, 0, 'it opens its own account’s install');
    assert.notEqual((await sftp(otherKey.file, loginA, 'pwd\n')).code, 0);

    const stranger = await keygen('stranger');
    const home = execFileSync('getent', ['passwd', loginA]).toString().split(':')[5] as string;
    for (const dir of [home, path.join(host.paths(w.install.id).dir, 'public')]) {
      const ssh = path.join(dir, '.ssh');
      if (!existsSync(dir)) planted.push(dir);
      await fs.mkdir(ssh, { recursive: true });
      await fs.writeFile(path.join(ssh, 'authorized_keys'), `${stranger.line}\n`, { mode: 0o600 });
      execFileSync('chown', ['-R', `${sysA}:${sysA}`, ssh]);
    }
    assert.notEqual((await sftp(stranger.file, loginA, 'pwd\n')).code, 0, 'the planted key opens nothing');
    assert.notEqual((await sftp(ownerKey.file, 'root', 'pwd\n')).code, 0);
    assert.notEqual((await sftp(ownerKey.file, 'www-data', 'pwd\n')).code, 0);
    assert.notEqual((await sftp(ownerKey.file, `hp${'0'.repeat(30)}`, 'pwd\n')).code, 0);
    // Another install's name, a system account's name (no login entry is made for it), a free name.
    assert.notEqual((await sftp(ownerKey.file, loginB, 'pwd\n')).code, 0);
    for (const name of ['mysql', 'nobody', 'daemon', 'nosuchinstall'])
      assert.notEqual((await sftp(ownerKey.file, name, 'pwd\n')).code, 0, name);
    // Fail closed: while Hostplane does not answer the key lookup, even the owner's key opens nothing.
    await services.sshAccess?.close();
    assert.notEqual((await sftp(ownerKey.file, loginA, 'pwd\n')).code, 0, 'refused while Hostplane is down');
    await services.sshAccess?.start();
    assert.equal((await sftp(ownerKey.file, loginA, 'pwd\n')).code, 0);
  });

  it('issue 31 revocation: partial scope changed, key deleted, user removed, install deleted, site transferred: the open session ends within 10 s, the next login is refused, the same user’s other installs keep working', async () => {
    const partialKey = await keygen('partial');
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id, a2.id as string] },
    ]);
    const fullKey = await keygen('full');
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const removedKey = await keygen('removed');
    const removed = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    for (const [member, key] of [
      [partial, partialKey],
      [full, fullKey],
      [removed, removedKey],
    ] as const) {
      const res = await member.client.post('/v1/ssh_keys', { public_key: key.line });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const ends = async (s: { ended: () => boolean }, what: string) => {
      const started = Date.now();
      assert.ok(await within(10_000, () => s.ended()), `${what}: the open session ended within 10 s`);
      return Date.now() - started;
    };

    // Partial scope changed: A leaves the scope; A2 still opens.
    const partialOnA = await session(partialKey.file, loginA);
    const scoped = await w.owner.client.patch(
      `/v1/accounts/${w.account.id}/account_users/${partial.userId}`,
      {
        roles: 'partial',
        install_ids: [a2.id],
      },
    );
    assert.equal(scoped.status, 200, JSON.stringify(scoped.body));
    const tookScope = await ends(partialOnA, 'partial scope');
    assert.notEqual((await sftp(partialKey.file, loginA, 'pwd\n')).code, 0);
    assert.equal((await sftp(partialKey.file, loginA2, 'pwd\n')).code, 0);

    // Key deleted.
    const fullOnA = await session(fullKey.file, loginA);
    const keys = await full.client.get('/v1/ssh_keys');
    const deleted = await full.client.delete(`/v1/ssh_keys/${(keys.body.results as Json[])[0]?.uuid}`);
    assert.equal(deleted.status, 204);
    const tookKey = await ends(fullOnA, 'key deleted');
    assert.notEqual((await sftp(fullKey.file, loginA, 'pwd\n')).code, 0);

    // User removed from the account.
    const removedOnA = await session(removedKey.file, loginA);
    const gone = await w.owner.client.delete(`/v1/accounts/${w.account.id}/account_users/${removed.userId}`);
    assert.equal(gone.status, 204, JSON.stringify(gone.body));
    const tookUser = await ends(removedOnA, 'user removed');
    assert.notEqual((await sftp(removedKey.file, loginA2, 'pwd\n')).code, 0);

    // Install deleted: the owner's session on A2 ends, its session on A stays, A still opens.
    const ownerOnA = await session(ownerKey.file, loginA);
    const ownerOnA2 = await session(ownerKey.file, loginA2);
    const del = await w.owner.client.delete(`/v1/installs/${a2.id}`);
    assert.equal(del.status, 204, JSON.stringify(del.body));
    const tookInstall = await ends(ownerOnA2, 'install deleted');
    assert.notEqual((await sftp(ownerKey.file, loginA2, 'pwd\n')).code, 0);
    assert.equal(ownerOnA.ended(), false, 'the owner’s session on A is still open');
    assert.equal((await sftp(ownerKey.file, loginA, 'pwd\n')).code, 0);
    await t.runJobs();

    // Site transferred to another account: a member of the origin only loses A; the owner of both keeps it.
    const dest = await f.account();
    const both = await t.admin.put(`/admin/v1/users/${w.owner.userId}/memberships/${dest.id}`, {
      roles: 'owner',
    });
    assert.ok(both.status < 300, JSON.stringify(both.body));
    const originKey = await keygen('origin-member');
    const origin = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    assert.equal((await origin.client.post('/v1/ssh_keys', { public_key: originKey.line })).status, 201);
    const originOnA = await session(originKey.file, loginA);
    const moved = await w.owner.client.post(`/v1/sites/${w.site.id}/site_transfers`, {
      destination_account_id: dest.id,
    });
    assert.equal(moved.status, 202, JSON.stringify(moved.body));
    await t.runJobs();
    const tookTransfer = await ends(originOnA, 'site transferred');
    assert.notEqual((await sftp(originKey.file, loginA, 'pwd\n')).code, 0);
    assert.equal(ownerOnA.ended(), false, 'the owner of both accounts keeps its session');
    assert.equal((await sftp(ownerKey.file, loginA, 'pwd\n')).code, 0);
    ownerOnA.child.stdin?.end();
    console.log(
      `revocation to session end (ms): scope ${tookScope}, key ${tookKey}, user ${tookUser}, install ${tookInstall}, transfer ${tookTransfer}`,
    );
  });

  it('issue 31 attribution: every login, accepted or refused, is an audit event with the user, the key’s fingerprint, the install and the address; /metrics counts them', async () => {
    const fingerprint = execFileSync('ssh-keygen', ['-l', '-f', `${ownerKey.file}.pub`])
      .toString()
      .split(' ')[1];
    let events: Json[] = [];
    const found = await within(8000, async () => {
      const res = await w.owner.client.get(
        `/v1/accounts/${w.account.id}/audit_events?action=ssh.login&limit=100`,
      );
      events = (res.body.results as Json[]) ?? [];
      return events.some((e) => e.status === 200) && events.some((e) => e.status === 403);
    });
    assert.ok(found, JSON.stringify(events).slice(0, 800));
    // The owner logged in to A by its name (and, in the escape matrix, by its system user's): the
    // name's login is the one checked here.
    const accepted = events.find(
      (e) =>
        e.status === 200 &&
        e.resource.id === w.install.id &&
        e.actor.user_id === w.owner.userId &&
        e.after.login === loginA,
    );
    assert.ok(accepted, 'the owner’s login to A');
    assert.equal(accepted.actor.ip, '127.0.0.1');
    assert.equal(accepted.method, 'SSH');
    assert.deepEqual(accepted.after, {
      result: 'accepted',
      login: loginA,
      install_name: w.install.name,
      fingerprint,
    });
    const refused = events.find((e) => e.status === 403 && e.after.result === 'refused');
    assert.ok(refused?.after.fingerprint, 'a refused login names its key');
    // sshd's log is followed on the gateway's tick: the last test's logins may be counted a tick later.
    let body = '';
    const count = (result: string) =>
      Number(new RegExp(`hostplane_ssh_logins_total\\{result="${result}"\\} (\\d+)`).exec(body)?.[1] ?? 0);
    const ended = () => Number(/hostplane_ssh_sessions_ended_total (\d+)/.exec(body)?.[1] ?? 0);
    const counted = await within(15_000, async () => {
      body = (await t.anonymous.get('/metrics')).raw.body;
      return count('accepted') >= 5 && count('refused') >= 5 && ended() >= 4;
    });
    assert.ok(counted, `accepted ${count('accepted')}, refused ${count('refused')}, ended ${ended()}`);
    // Decision 203: each accepted login's signature lookup reused its connection's probe answer.
    const stats = services.sshAccess?.stats();
    assert.ok(stats && stats.reused >= count('accepted') / 2, JSON.stringify(stats));
  });

  it('issue 31 (issue 28 finding 3 over SFTP): A’s user swaps its directories for links to B’s files and the host’s while the platform backs up, restores and deletes A: nothing outside A is deleted, read or changed', async () => {
    const A = w.install.id;
    const B = wb.install.id;
    const bPublic = host.paths(B).public;
    // Outside every install, root-only: a watched directory (with a subdirectory) and a canary file.
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), 'sftp-swap-outside-'));
    const watched = path.join(outside, 'watched');
    const canaryText = `CANARY-${Date.now()}-${process.pid}-${Math.random().toString(36).slice(2)}`;
    await fs.mkdir(path.join(watched, 'sub'), { recursive: true, mode: 0o700 });
    for (let i = 0; i < 20; i++) await fs.writeFile(path.join(watched, `f${i}`), `watched ${i}\n`);
    await fs.writeFile(path.join(watched, 'sub', 'secret'), `${canaryText}\n`, { mode: 0o600 });
    await fs.chmod(outside, 0o700);
    // B's own file, its user's alone (0600): its content must never reach A's tree or backups.
    const bText = `B-ONLY-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const bFile = path.join(bPublic, 'b-only.txt');
    await fs.writeFile(bFile, `${bText}\n`, { mode: 0o600 });
    execFileSync('chown', [`${userOf(B)}:${userOf(B)}`, bFile]);
    const before = { watched: await checksums(watched), b: await checksums(bPublic) };
    const holders = (text: string) => {
      try {
        return execFileSync('grep', ['-r', '-l', '-F', '-D', 'skip', '--', text, host.root], {
          encoding: 'utf8',
        })
          .trim()
          .split('\n');
      } catch (err) {
        if ((err as { status?: number }).status === 1) return [];
        throw err;
      }
    };
    const bRoot = path.dirname(bPublic);
    const assertNothingEscaped = async (when: string) => {
      assert.deepEqual(await checksums(watched), before.watched, `${when}: the host's directory changed`);
      assert.deepEqual(await checksums(bPublic), before.b, `${when}: B's files changed`);
      assert.deepEqual(holders(canaryText), [], `${when}: the host's secret reached a tree`);
      assert.deepEqual(
        holders(bText).filter((p) => !p.startsWith(`${bRoot}/`)),
        [],
        `${when}: B's file reached another tree`,
      );
    };

    // A's user plants directories over SFTP (inside its chroot: /public, and /public.old while a
    // restore swaps the document root), each with files for the platform to walk.
    const DIRS = 24;
    const seed = path.join(keysDir, 'seed.txt');
    await fs.writeFile(seed, 'seed\n');
    const plant = async () => {
      const lines: string[] = [];
      for (let i = 0; i < DIRS; i++)
        lines.push(`-rm /public/d${i}`, `-mkdir /public/d${i}`, `put ${seed} /public/d${i}/f0`);
      const res = await sftp(ownerKey.file, loginA, `${lines.join('\n')}\n`);
      assert.equal(res.code, 0, res.stderr);
    };
    const targets = [watched, bPublic, path.join(watched, 'sub'), `../../hp_${B.replace(/-/g, '')}/public`];

    /**
     * One SFTP session of A fed rounds of swaps (each directory renamed away, a link put in its place)
     * in /public and /public.old, errors ignored (`-`), until stopped or its session ends. Answers the
     * rounds sent and the swaps that succeeded in /public.old (renames there that did not fail).
     */
    function swapper() {
      const child = spawn(
        'sftp',
        ['-b', '-', ...clientOptions(ownerKey.file), '-P', String(sshPort), `${loginA}@127.0.0.1`],
        { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } },
      );
      open.push(child);
      let marks = 0;
      let tail = '';
      child.stdout.on('data', (c: Buffer) => {
        const text = tail + c.toString('latin1');
        marks += text.split('Remote working directory').length - 1;
        tail = text.slice(-30).replace(/Remote working directory/g, '');
      });
      let oldFailures = 0;
      let errTail = '';
      child.stderr.on('data', (c: Buffer) => {
        const text = errTail + c.toString('latin1');
        const lines = text.split('\n');
        errTail = lines.pop() ?? '';
        for (const line of lines) if (line.includes('rename "/public.old/')) oldFailures++;
      });
      let exited = false;
      child.on('exit', () => {
        exited = true;
      });
      child.stdin.on('error', () => undefined);
      let stop = false;
      let rounds = 0;
      const done = (async () => {
        while (!stop && !exited) {
          const lines: string[] = [];
          for (const dir of ['/public.old', '/public'])
            for (let i = 0; i < DIRS; i++)
              lines.push(
                `-rename ${dir}/d${i} ${dir}/x${i}r${rounds}`,
                `-symlink ${targets[(i + rounds) % targets.length]} ${dir}/d${i}`,
              );
          lines.push('pwd');
          child.stdin.write(`${lines.join('\n')}\n`);
          rounds++;
          await within(15_000, () => marks >= rounds || exited);
        }
        child.stdin.end();
        await within(10_000, () => exited);
        if (!exited) child.kill('SIGKILL');
      })();
      return {
        async stop() {
          stop = true;
          await done;
          return { rounds, oldSwaps: rounds * DIRS - oldFailures, ended: exited };
        },
      };
    }
    const client = w.owner.client;
    async function raced(what: string, start: () => Promise<Awaited<ReturnType<typeof client.post>>>) {
      await plant();
      const racer = swapper();
      // The racer's first round is in before the platform starts.
      await new Promise((r) => setTimeout(r, 300));
      const res = await start();
      assert.ok([202, 204].includes(res.status), `${what}: ${JSON.stringify(res.body)}`);
      await t.runJobs();
      const swaps = await racer.stop();
      await assertNothingEscaped(what);
      return { res, swaps };
    }

    try {
      const backedUp = await raced('backup', () =>
        client.post(`/v1/installs/${A}/backups`, { description: 'sftp swap', notification_emails: [] }),
      );
      const backupOp = await operationOf(client, backedUp.res);
      // A's own race may fail its own operation; it must never reach outside.
      assert.ok(['completed', 'failed'].includes(String(backupOp.status)), JSON.stringify(backupOp));
      let backupId = backedUp.res.body.id as string;
      if (backupOp.status !== 'completed') {
        const clean = await client.post(`/v1/installs/${A}/backups`, {
          description: 'sftp swap (clean)',
          notification_emails: [],
        });
        await t.runJobs();
        assert.equal((await operationOf(client, clean)).status, 'completed');
        backupId = clean.body.id as string;
      }
      const restores: string[] = [];
      for (let round = 0; round < 2; round++) {
        const restored = await raced(`restore ${round}`, () =>
          client.post(`/v1/installs/${A}/backups/${backupId}/restore`, {
            notification_emails: [],
            restore_database: false,
            create_checkpoint: false,
          }),
        );
        const op = await operationOf(client, restored.res);
        assert.ok(['completed', 'failed'].includes(String(op.status)), JSON.stringify(op));
        restores.push(
          `${op.status} (${restored.swaps.rounds} rounds, ${restored.swaps.oldSwaps} in public.old)`,
        );
      }
      // The delete: the session is A's uid's, ended with A's processes before its files go.
      const deleted = await raced('delete', () => client.delete(`/v1/installs/${A}`));
      assert.equal(deleted.swaps.ended, true, "A's SFTP session ended with A");
      assert.equal(existsSync(host.paths(A).dir), false, "A's directory is gone");
      assert.notEqual((await sftp(ownerKey.file, loginA, 'pwd\n')).code, 0, 'A opens no more');
      console.log(
        `sftp swap race: backup ${backupOp.status}${backupOp.status === 'completed' ? '' : ` ${JSON.stringify(backupOp.error ?? backupOp).slice(0, 300)}`} (${backedUp.swaps.rounds} rounds); restores ${restores.join(', ')}; delete (${deleted.swaps.rounds} rounds)`,
      );
    } finally {
      await fs.rm(outside, { recursive: true, force: true });
    }
  });
});
