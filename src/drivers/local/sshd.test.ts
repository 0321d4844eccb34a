import assert from 'node:assert/strict';
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  createLogFollower,
  fingerprintOf,
  installIdRange,
  isLogin,
  parseSshdLine,
  RESERVED_LOGINS,
  sftpCommand,
  sshdConfigText,
  sshdDoctorChecks,
  sshdPaths,
  sshdRuntimeChecks,
} from './sshd.js';

describe('sshd (issue 31)', () => {
  it('reads the log lines that attribute a login: accepted, refused (a key, an unknown or disallowed user), the session process', () => {
    const login = `hp${'a'.repeat(30)}`;
    const fp = 'SHA256:rQmC1Rjs4wROPmn1LkVLZYRbQ5c9wqbks3L9wWTXyLM';
    assert.deepEqual(
      parseSshdLine(`Accepted publickey for ${login} from 10.0.0.7 port 4242 ssh2: ED25519 ${fp}`),
      {
        kind: 'accepted',
        login,
        address: '10.0.0.7',
        fingerprint: fp,
      },
    );
    assert.deepEqual(parseSshdLine(`Failed publickey for ${login} from ::1 port 1 ssh2: RSA ${fp}`), {
      kind: 'refused',
      login,
      address: '::1',
      fingerprint: fp,
    });
    assert.deepEqual(parseSshdLine('Invalid user nosuch from 127.0.0.1 port 43362'), {
      kind: 'refused',
      login: 'nosuch',
      address: '127.0.0.1',
      fingerprint: null,
    });
    assert.deepEqual(parseSshdLine('User root from 127.0.0.1 not allowed because not listed in AllowUsers'), {
      kind: 'refused',
      login: 'root',
      address: '127.0.0.1',
      fingerprint: null,
    });
    assert.deepEqual(parseSshdLine('User child is on pid 27734'), { kind: 'session', pid: 27734 });
    for (const other of [
      `Accepted key ED25519 ${fp} found at /usr/bin/curl:1`,
      'Postponed publickey for x from 127.0.0.1 port 1 ssh2 [preauth]',
      // A login name cannot smuggle a second "from": the address is the last field sshd wrote.
      `Accepted publickey for a from 1.2.3.4 port 1 ssh2: ED25519 ${fp} trailing`,
    ])
      assert.equal(parseSshdLine(other), null, other);
  });

  it('a login names the install ids whose first 30 hex digits it holds; other names none', () => {
    assert.deepEqual(installIdRange(`hp${'0123456789abcdef0123456789abcd'}`), {
      low: '01234567-89ab-cdef-0123-456789abcd00',
      high: '01234567-89ab-cdef-0123-456789abcdff',
    });
    for (const bad of ['root', `hp${'A'.repeat(30)}`, `hp${'a'.repeat(31)}`, `hp_${'a'.repeat(30)}`])
      assert.equal(installIdRange(bad), null, bad);
  });

  it('issue 31: the log follower copies a log past its size limit to <log>.1 and empties it in place; appends after that are read, none twice', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sshd-log-'));
    try {
      const log = path.join(dir, 'sshd.log');
      const line = (n: number) => `User child is on pid ${n}\n`;
      await writeFile(log, '');
      const follow = createLogFollower(log, true, 200);
      await appendFile(log, Array.from({ length: 10 }, (_, i) => line(100 + i)).join(''));
      assert.deepEqual(
        (await follow()).map((e) => (e.kind === 'session' ? e.pid : 0)),
        Array.from({ length: 10 }, (_, i) => 100 + i),
      );
      assert.equal((await stat(log)).size, 0, 'emptied past 200 bytes');
      assert.match(await readFile(`${log}.1`, 'utf8'), /pid 109\n$/);
      await appendFile(log, line(7));
      assert.deepEqual(await follow(), [{ kind: 'session', pid: 7 }]);
      assert.deepEqual(await follow(), []);
      // A partial last line is never cut: the log is kept until the line is whole.
      await appendFile(log, `${line(8).repeat(12)}User child is on`);
      assert.equal((await follow()).length, 12);
      assert.ok((await stat(log)).size > 200);
      await appendFile(log, ' pid 9\n');
      assert.deepEqual(await follow(), [{ kind: 'session', pid: 9 }]);
      assert.equal((await stat(log)).size, 0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('issue 31: hostplane doctor says whether sshd runs, passes sshd -t and answers on SSH_PORT with its own host key', async () => {
    const root = '/srv/hp';
    const p = sshdPaths(root);
    const files: Record<string, string> = {
      [p.pid]: '4242\n',
      '/proc/4242/cmdline': `/usr/sbin/sshd\0-f\0${p.config}\0-E\0${p.log}\0`,
      [`${p.hostKey}.pub`]: 'ssh-ed25519 AAAAOURS hostplane\n',
      [p.config]: 'Port 2222\n',
    };
    let scan = '127.0.0.1 ssh-ed25519 AAAAOURS\n';
    const probe = {
      exists: (f: string) => f in files,
      readText: (f: string) => files[f] ?? null,
      output: async (command: string, args: string[]) => {
        if (command === 'ssh-keyscan') {
          assert.deepEqual(args.slice(-3), ['-p', '2222', '127.0.0.1']);
          return scan;
        }
        if (files[p.config]?.includes('Bogus')) throw new Error('Bad configuration option: Bogus');
        return '';
      },
    };
    const config = { port: 2222, address: '0.0.0.0' };
    const summary = async () =>
      (await sshdRuntimeChecks(root, config, probe)).map(
        (c) => `${c.ok ? 'ok' : c.warning ? 'warn' : 'fail'} ${c.detail}`,
      );
    assert.deepEqual(await summary(), [
      'ok sshd -t: valid',
      'ok pid 4242',
      'ok answers with Hostplane’s host key',
    ]);
    scan = '127.0.0.1 ssh-ed25519 AAAAOTHER\n';
    assert.match((await summary())[2] ?? '', /^fail another SSH server answers/);
    files[p.config] = 'Bogus yes\n';
    delete files[p.pid];
    scan = '';
    assert.deepEqual(await summary(), [
      'fail sshd -t: Bad configuration option: Bogus',
      `warn no live sshd of ours in ${p.pid} (hostplane serve starts it; it outlives Hostplane)`,
      'warn nothing answers SSH on the port',
    ]);
  });

  it('fingerprints a key blob as ssh-keygen -l does', () => {
    assert.match(fingerprintOf(Buffer.from('blob').toString('base64')), /^SHA256:[A-Za-z0-9+/]{43}$/);
  });

  it('writes a configuration with keys only from the control plane, a chroot per login and nothing forwarded', () => {
    const text = sshdConfigText(sshdPaths('/srv/hp'), { port: 2222, address: '127.0.0.1' });
    for (const line of [
      'Port 2222',
      'AuthorizedKeysFile none',
      'PasswordAuthentication no',
      'DisableForwarding yes',
      'PermitUserEnvironment no',
      'PermitTunnel no',
      'ChrootDirectory /srv/hp/sshd/chroot/%u',
      'ForceCommand internal-sftp -d /public -u 027',
      'DenyUsers root hpsshauth',
      'PermitTTY no',
    ])
      assert.ok(text.split('\n').includes(line), line);
    // Decision 203: the shell only starts curl with the fields as arguments, and sshd's process of the connection.
    assert.match(
      text,
      /^AuthorizedKeysCommand \/bin\/sh -c 'exec \/usr\/bin\/curl -q -sf .*--unix-socket \/srv\/hp\/sshd\/auth\/keys\.sock .*--data-urlencode "uid=\$2" .*--data-urlencode "monitor=\$PPID" http:\/\/hostplane\/ssh\/keys' hpkeys %u %U %t %k$/m,
    );
  });

  it('issue 31 (decision 186): SSH_SHELLS=on drops the chroot and the forced command (each key line decides), never forwarding', () => {
    const lines = sshdConfigText(sshdPaths('/srv/hp'), {
      port: 2222,
      address: '127.0.0.1',
      shells: true,
    }).split('\n');
    for (const line of [
      'PermitTTY yes',
      'DisableForwarding yes',
      'AllowTcpForwarding no',
      'PermitTunnel no',
      'Subsystem sftp internal-sftp -d %d/../public -u 027',
    ])
      assert.ok(lines.includes(line), line);
    assert.equal(lines.filter((l) => /^(ChrootDirectory|ForceCommand)/.test(l)).length, 0);
  });

  it('issue 31 (decision 185): a login is an install name or an install user, nothing else; system account names are reserved', () => {
    for (const ok of ['myblog', 'abc', `a${'b'.repeat(13)}`, `hp${'0'.repeat(30)}`])
      assert.ok(isLogin(ok), ok);
    for (const bad of [
      'ab',
      '1abc',
      'My',
      `a${'b'.repeat(14)}`,
      'www-data',
      'a.b',
      '',
      `hp${'0'.repeat(31)}`,
    ])
      assert.equal(isLogin(bad), false, bad);
    for (const name of ['root', 'mysql', 'redis', 'postgres', 'hpsshauth', 'sshd', 'nobody'])
      assert.ok(RESERVED_LOGINS.has(name), name);
    assert.equal(
      sftpCommand('/srv/hp/installs/hp_0/public'),
      'internal-sftp -d /srv/hp/installs/hp_0/public -u 027',
    );
    assert.throws(() => sftpCommand('/srv/a b'));
  });

  it('hostplane doctor with SSH_PORT: sshd, ssh-keygen and curl with their packages, and the chroot rule (a HOSTING_ROOT under /tmp fails it)', async () => {
    const missing = new Set(['/usr/bin/curl']);
    const checks = await sshdDoctorChecks('/tmp/hostplane-doctor/hosting', {
      output: async (command) => {
        if (missing.has(command)) throw new Error('not found');
        return 'OpenSSH_9.2';
      },
    });
    assert.deepEqual(
      checks.map((c) => [c.name, c.ok, c.debianPackage]),
      [
        ['sshd (SSH_PORT)', true, 'openssh-server'],
        ['ssh-keygen (the SSH host key; openssh-client)', true, 'openssh-client'],
        ['curl (the SSH key lookup)', false, 'curl'],
        ['HOSTING_ROOT chroot rule (SSH_PORT)', false, null],
      ],
    );
    assert.match(checks[3]?.detail ?? '', /^\/tmp is mode 1777/);
  });
});
