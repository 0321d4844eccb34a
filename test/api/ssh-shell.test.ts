// test-db: postgres (the subject is Hostplane's sshd, the install users and MariaDB, not the control plane's database: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Sshd } from '../../src/drivers/local/sshd.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Client, type Json, type Res } from '../support/harness.js';
import { operationOf, readyInstall, readyWorld } from '../support/jobs.js';
import { checksums, type LocalDriverProbe, localHosting } from '../support/local-hosting.js';
import { clientOptions, sshClient, within } from '../support/ssh-client.js';
import { freePort, stopWebTier, userOf } from '../support/web-tier.js';

// Issue 31 with SSH_SHELLS=on (decisions 185, 186): owners and full users get a shell and commands as
// the install's own user, logging in by the install's name; partial users SFTP only. From A's shell,
// B stays out of reach (the uid is the boundary); the isolation issue's attacks made over SFTP and
// the shell (a linked wp-config.php, a setuid file, a FIFO) then backup, restore, copy and deprovision:
// nothing escapes. One web tier and three installs for the whole file: A and A2 (one account), B.
const TOOLS = [
  '/usr/sbin/sshd',
  '/usr/bin/ssh',
  '/usr/bin/sftp',
  '/usr/bin/curl',
  '/usr/sbin/nginx',
  '/usr/bin/php',
  '/usr/bin/mysql',
  '/usr/bin/git',
  '/usr/bin/rsync',
];
const missing = TOOLS.filter((p) => !existsSync(p));
const PARENT = '/var/lib/hostplane-test';

/**
 * Bash run in the install (`ssh <install> bash -s`): reads the install's own database account out of
 * its wp-config.php (CFG) into H, P, U, PW, N, as any site owner would.
 */
const READ_DB = String.raw`eval "$(php -r '
  preg_match_all("/define\\(\x27(DB_[A-Z]+)\x27, \x27((?:[^\x27\\\\]|\\\\.)*)\x27\\);/", file_get_contents(getenv("CFG")), $m, PREG_SET_ORDER);
  $v = []; foreach ($m as $d) $v[$d[1]] = preg_replace("/\\\\(.)/", "$1", $d[2]);
  [$h, $p] = explode(":", $v["DB_HOST"]);
  foreach (["H" => $h, "P" => $p, "U" => $v["DB_USER"], "PW" => $v["DB_PASSWORD"], "N" => $v["DB_NAME"]] as $k => $x) echo "$k=" . escapeshellarg($x) . "\n";
')"
`;

describe('SSH shells for owners and full users (issue 31, SSH_SHELLS=on)', {
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
      SSH_SHELLS: 'on',
    },
  });
  const f = factories(t);
  const keysDir = await fs.mkdtemp(path.join(PARENT, 'keys-'));
  // Outside HOSTING_ROOT, root-only: a canary whose content must never reach a tree, and a watched
  // directory that must never change (test/api/hostile-tenant-files.test.ts).
  const outside = await fs.mkdtemp(path.join(os.tmpdir(), 'ssh-hostile-'));
  const canary = path.join(outside, 'canary', 'secret');
  const canaryText = `CANARY-${randomBytes(16).toString('hex')}`;
  const watched = path.join(outside, 'watched');
  await fs.mkdir(path.dirname(canary), { mode: 0o700 });
  await fs.writeFile(canary, `${canaryText}\n`, { mode: 0o600 });
  await fs.mkdir(watched, { mode: 0o700 });
  for (let i = 0; i < 5; i++)
    await fs.writeFile(path.join(watched, `f${i}`), `watched ${i}\n`, { mode: 0o600 });
  await fs.chmod(outside, 0o700);
  const watchedSums = await checksums(watched);
  const installIds: string[] = [];
  const services = t.app.services;
  const sshd = services.sshAccess && (services.driver as unknown as { sshd: Sshd }).sshd;
  assert.ok(
    sshd && services.sshAccess,
    'SSH_PORT gives the local driver an sshd and the control plane its gateway',
  );
  const { sftp, ssh, throughForward } = sshClient(sshPort);

  after(async () => {
    await services.sshAccess?.close();
    for (const session of await sshd.sessions()) await sshd.endSession(session);
    await sshd.stop();
    await stopWebTier(path.join(host.root, 'web'), installIds);
    await within(3000, () => !existsSync(sshd.paths.pid));
    // The key lookup's account `hpsshauth` stays (a system account, as a package's would): another
    // file's sshd may be asking with it right now.
    await t.close();
    await host.cleanup();
    await fs.rm(keysDir, { recursive: true, force: true });
    await fs.rm(outside, { recursive: true, force: true });
  });

  async function keygen(name: string) {
    const file = path.join(keysDir, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `${name}@hostplane.test`, '-f', file]);
    return { file, line: (await fs.readFile(`${file}.pub`, 'utf8')).trim() };
  }
  async function register(client: Client, name: string) {
    const key = await keygen(name);
    const res = await client.post('/v1/ssh_keys', { public_key: key.line });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return key;
  }
  async function completed(client: Client, res: Res, what: string) {
    assert.equal(res.status, 202, `${what}: ${JSON.stringify(res.body)}`);
    await t.runJobs();
    const op = await operationOf(client, res);
    assert.equal(op.status, 'completed', `${what}: ${JSON.stringify(op).slice(0, 1500)}`);
  }
  /** Files (not followed links) under HOSTING_ROOT whose content holds the canary (FIFOs skipped). */
  function canaryHolders(): string[] {
    try {
      return execFileSync('grep', ['-r', '-l', '-F', '-D', 'skip', '--', canaryText, host.root], {
        encoding: 'utf8',
      })
        .trim()
        .split('\n');
    } catch (err) {
      if ((err as { status?: number }).status === 1) return [];
      throw err;
    }
  }
  const setIdFiles = () =>
    execFileSync('find', [host.root, '-perm', '/6000', '-print'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean);
  /** `allowed`: a setuid file the tenant itself made in its own tree (its own uid, never root's). */
  async function assertNothingEscaped(what: string, allowed: string[] = []) {
    for (const file of allowed) assert.notEqual((await fs.stat(file)).uid, 0, `${what}: ${file} is root's`);
    assert.deepEqual(await checksums(watched), watchedSums, `${what}: the watched directory changed`);
    assert.equal((await fs.readFile(canary, 'utf8')).trim(), canaryText, `${what}: the canary was written`);
    assert.deepEqual(canaryHolders(), [], `${what}: the canary's content reached a tree`);
    assert.deepEqual(setIdFiles(), allowed, `${what}: a setuid/setgid file under HOSTING_ROOT`);
  }

  let w: Awaited<ReturnType<typeof readyWorld>>;
  let wb: Awaited<ReturnType<typeof readyWorld>>;
  let a2: Json;
  let nameA: string;
  let nameB: string;
  let uidA: number;
  let ownerKey: Awaited<ReturnType<typeof keygen>>;
  let partialKey: Awaited<ReturnType<typeof keygen>>;
  let ownerBKey: Awaited<ReturnType<typeof keygen>>;
  let pathsA: ReturnType<typeof host.paths>;
  let pathsB: ReturnType<typeof host.paths>;
  before(async () => {
    w = await readyWorld(t, f);
    a2 = await readyInstall(t, f, w);
    wb = await readyWorld(t, f);
    for (const id of [w.install.id, a2.id as string, wb.install.id]) installIds.push(id);
    [nameA, nameB] = [w.install.name, wb.install.name];
    pathsA = host.paths(w.install.id);
    pathsB = host.paths(wb.install.id);
    uidA = Number(
      execFileSync('id', ['-u', userOf(w.install.id)])
        .toString()
        .trim(),
    );
    await services.driver.start?.();
    await services.sshAccess?.start();
    ownerKey = await register(w.owner.client, 'owner');
    ownerBKey = await register(wb.owner.client, 'owner-b');
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    partialKey = await register(partial.client, 'partial');
  });

  it('issue 31: the owner runs `ssh <install> cmd` as the install’s user: php, the MariaDB client on its own database, git, rsync, tar; and gets an interactive shell', async () => {
    const id = await ssh(ownerKey.file, nameA, ['id -u; pwd; php -r "echo 6 * 7, PHP_EOL;"']);
    assert.equal(id.code, 0, id.stderr);
    const [uid, cwd, php] = id.stdout.trim().split('\n');
    assert.equal(Number(uid), uidA, 'the install’s own uid');
    assert.equal(cwd, pathsA.private, 'the session starts in the install’s private directory (its home)');
    assert.equal(php, '42');
    const db = await ssh(
      ownerKey.file,
      nameA,
      ['bash', '-s'],
      [],
      `export CFG=${path.join(pathsA.public, 'wp-config.php')}\n${READ_DB}\nmysql -h "$H" -P "$P" -u "$U" -p"$PW" "$N" -N -e 'select count(*) > 0 from wp_options'\n`,
    );
    assert.equal(db.code, 0, db.stderr);
    assert.equal(db.stdout.trim(), '1', 'the MariaDB client reads its own database');
    const tools = await ssh(ownerKey.file, nameA, [
      `set -e; cd ${pathsA.private}; git init -q repo && git -C repo --version >/dev/null; ` +
        `rsync -a ${pathsA.public}/wp-includes/version.php copy.php; tar -cf t.tar copy.php; stat -c %u copy.php t.tar; rm -rf repo copy.php t.tar`,
    ]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.deepEqual(
      tools.stdout.trim().split('\n'),
      [String(uidA), String(uidA)],
      'files are the install’s',
    );
    // An interactive shell (a pty): `ssh -tt` with the commands on its terminal.
    const shell = await ssh(
      ownerKey.file,
      nameA,
      [],
      ['-tt'],
      'echo SHELL-$((6*7)) $(tty | cut -c1-8)\nexit\n',
    );
    assert.match(shell.stdout, /SHELL-42 \/dev\/pts/);
  });

  it('issue 31: a partial user gets SFTP only (in the document root): no command, no pty, no rsync -e or git --upload-pack trick; the install user’s own name is SFTP only', async () => {
    const put = await sftp(partialKey.file, nameA, 'pwd\nls wp-config.php\n');
    assert.equal(put.code, 0, put.stderr);
    assert.match(put.stdout, new RegExp(`Remote working directory: ${pathsA.public}`));
    const command = await ssh(partialKey.file, nameA, ['id; echo RAN-$((6*7))'], ['-T']);
    assert.doesNotMatch(command.stdout, /uid=|RAN-42/);
    const pty = await ssh(partialKey.file, nameA, [], ['-tt'], 'echo RAN-$((6*7))\n');
    assert.doesNotMatch(pty.stdout, /RAN-42/);
    // rsync -e runs "rsync --server ..." remotely; git --upload-pack runs the given command: both are
    // replaced by SFTP, so neither runs anything of theirs.
    const dest = path.join(keysDir, 'rsync-dest');
    const sshCmd = `ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -i ${partialKey.file} -p ${sshPort}`;
    const rsync = await new Promise<number>((resolve) =>
      execFile(
        'rsync',
        [
          '-e',
          sshCmd,
          '--rsync-path=id > /tmp/hp-rsync-pwned; rsync',
          `${nameA}@127.0.0.1:wp-config.php`,
          dest,
        ],
        { timeout: 30_000, env: { PATH: '/usr/bin:/bin' } },
        (err) => resolve(err ? 1 : 0),
      ),
    );
    assert.notEqual(rsync, 0);
    assert.equal(existsSync(dest), false);
    const git = await new Promise<number>((resolve) =>
      execFile(
        'git',
        [
          'ls-remote',
          '--upload-pack=touch /tmp/hp-git-pwned; git-upload-pack',
          `ssh://${nameA}@127.0.0.1:${sshPort}/x`,
        ],
        {
          timeout: 30_000,
          env: { PATH: '/usr/bin:/bin', GIT_SSH_COMMAND: sshCmd.replace(` -p ${sshPort}`, '') },
        },
        (err) => resolve(err ? 1 : 0),
      ),
    );
    assert.notEqual(git, 0);
    for (const planted of ['/tmp/hp-rsync-pwned', '/tmp/hp-git-pwned'])
      assert.equal(existsSync(planted), false, planted);
    // The install user's own name (hp + 30 hex: the pool's nologin account) is SFTP only, even for the owner.
    const sys = userOf(w.install.id);
    const ownerBySys = await ssh(ownerKey.file, sys, ['echo RAN-$((6*7))'], ['-T']);
    assert.doesNotMatch(ownerBySys.stdout, /RAN-42/);
    const listed = await sftp(ownerKey.file, sys, 'pwd\n');
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`Remote working directory: ${pathsA.public}`));
  });

  it('issue 31 escape matrix from A’s shell: B’s wp-config.php, B’s PHP-FPM socket, B’s database with A’s credentials, ssh -L and -W to 127.0.0.1:3306: each refused', async () => {
    const bConfig = path.join(pathsB.public, 'wp-config.php');
    assert.ok(existsSync(bConfig));
    const read = await ssh(ownerKey.file, nameA, [`cat ${bConfig}; ls ${pathsB.public}; echo END`]);
    assert.doesNotMatch(read.stdout, /DB_PASSWORD|wp-settings/);
    assert.match(read.stderr, /Permission denied/);
    const socket = path.join(host.root, 'web', 'run', `hp_${wb.install.id.replace(/-/g, '')}.sock`);
    assert.ok(existsSync(socket), socket);
    const fpm = await ssh(ownerKey.file, nameA, [
      `php -r '$s = @stream_socket_client("unix://${socket}", $no, $err, 5); echo $s ? "CONNECTED" : "REFUSED $err", PHP_EOL;'`,
    ]);
    assert.match(fpm.stdout, /REFUSED .*Permission denied/);
    const account = await (services.driver as unknown as LocalDriverProbe).accountOf(wb.install.id);
    assert.ok(account);
    const db = await ssh(
      ownerKey.file,
      nameA,
      ['bash', '-s'],
      [],
      `export CFG=${path.join(pathsA.public, 'wp-config.php')}\n${READ_DB}\nmysql -h "$H" -P "$P" -u "$U" -p"$PW" ${account.db_name} -N -e 'select 1 from wp_options limit 1' 2>&1; echo "exit $?"\n`,
    );
    assert.match(db.stdout, /Access denied/);
    assert.doesNotMatch(db.stdout, /exit 0/);
    const greeting = await throughForward(ownerKey.file, nameA, await freePort(), 3306);
    assert.equal(greeting, '', 'nothing of MariaDB came through ssh -L');
    const stdio = await ssh(ownerKey.file, nameA, [], ['-W', '127.0.0.1:3306']);
    assert.notEqual(stdio.code, 0);
    assert.doesNotMatch(stdio.stdout, /mysql|MariaDB/i);
    const agent = await ssh(
      ownerKey.file,
      nameA,
      ['echo "agent:$SSH_AUTH_SOCK"'],
      ['-A', '-o', 'ForwardAgent=yes'],
    );
    assert.match(agent.stdout, /^agent:$/m, 'no agent socket is forwarded');
    // B's owner reaches B, not A, by name.
    assert.equal((await ssh(ownerBKey.file, nameB, ['true'])).code, 0);
    assert.notEqual((await ssh(ownerBKey.file, nameA, ['true'])).code, 0);
  });

  it('issue 31 revocation of a shell: a full user removed from the account: its running command and the session end within 10 s', async () => {
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const key = await register(full.client, 'full');
    const marker = `hp-revoke-${randomBytes(4).toString('hex')}`;
    const child = spawn(
      'ssh',
      [
        ...clientOptions(key.file),
        '-p',
        String(sshPort),
        `${nameA}@127.0.0.1`,
        `exec -a ${marker} sleep 300`,
      ],
      { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } },
    );
    let exited = false;
    child.on('exit', () => {
      exited = true;
    });
    const running = () => {
      try {
        return (
          execFileSync('pgrep', ['-u', String(uidA), '-f', marker])
            .toString()
            .trim() !== ''
        );
      } catch {
        return false;
      }
    };
    try {
      assert.ok(await within(15_000, running), 'the command runs as A’s user');
      const started = Date.now();
      const gone = await w.owner.client.delete(`/v1/accounts/${w.account.id}/account_users/${full.userId}`);
      assert.equal(gone.status, 204, JSON.stringify(gone.body));
      assert.ok(await within(10_000, () => exited && !running()), 'the session and its command ended');
      console.log(`shell revocation to end: ${Date.now() - started} ms`);
      assert.notEqual((await ssh(key.file, nameA, ['true'])).code, 0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('issue 31 with issue 28: a wp-config.php linked to a root-only file, a setuid file (over SFTP) and a FIFO (from the shell), then backup, restore, copy and deprovision: nothing escapes', async () => {
    const client = w.owner.client;
    const A = w.install.id;
    const A2 = a2.id as string;
    const shAt = path.join(keysDir, 'sh');
    await fs.copyFile('/bin/sh', shAt);
    await fs.chmod(shAt, 0o755);
    const planted = await sftp(
      ownerKey.file,
      nameA,
      `rm wp-config.php\nsymlink ${canary} wp-config.php\nput ${shAt} wp-content/sh\nchmod 4755 wp-content/sh\nsymlink ${watched} wp-content/evil-dir\n`,
    );
    assert.equal(planted.code, 0, planted.stderr);
    const fifo = await ssh(ownerKey.file, nameA, [`mkfifo ${pathsA.public}/wp-includes/fifo && echo MADE`]);
    assert.match(fifo.stdout, /MADE/, fifo.stderr);
    const backup = await client.post(`/v1/installs/${A}/backups`, {
      description: 'hostile over SFTP',
      notification_emails: [],
    });
    await completed(client, backup, 'backup');
    const own = path.join(pathsA.public, 'wp-content', 'sh');
    assert.equal((await fs.stat(own)).uid, uidA, 'the setuid file is A’s own');
    await assertNothingEscaped('backup', [own]);
    await completed(
      client,
      await client.post(`/v1/installs/${A}/backups/${backup.body.id}/restore`, {
        notification_emails: [],
        restore_database: false,
        create_checkpoint: false,
      }),
      'restore',
    );
    await assertNothingEscaped('restore');
    const config = await fs.lstat(path.join(pathsA.public, 'wp-config.php'));
    assert.ok(config.isFile(), 'wp-config.php is a regular file again');
    await completed(
      client,
      await client.post('/v1/install_copy', {
        source_environment_id: A,
        destination_environment_id: A2,
        custom_options: { include_files: true, db_tables: ['wp_posts'] },
      }),
      'copy A -> A2',
    );
    await assertNothingEscaped('copy');
    // The owner's shell still works on A after all that, as A's user.
    const after = await ssh(ownerKey.file, nameA, ['id -u']);
    assert.equal(after.stdout.trim(), String(uidA), after.stderr);
    const del = await client.delete(`/v1/installs/${A}`);
    assert.equal(del.status, 204, JSON.stringify(del.body));
    await t.runJobs();
    await services.sshAccess?.tick();
    assert.equal(existsSync(pathsA.dir), false, "A's directory is gone");
    await assertNothingEscaped('deprovision');
    // Its login entry went with it; the name opens nothing; A2 still opens.
    const passwd = await fs.readFile('/etc/passwd', 'utf8');
    assert.doesNotMatch(passwd, new RegExp(`^${nameA}:`, 'm'));
    assert.notEqual((await ssh(ownerKey.file, nameA, ['true'])).code, 0);
    assert.equal((await ssh(ownerKey.file, a2.name as string, ['true'])).code, 0);
  });
});
