import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fingerprintOf,
  installIdRange,
  isLogin,
  parseSshdLine,
  RESERVED_LOGINS,
  sftpCommand,
  sshdConfigText,
  sshdDoctorChecks,
  sshdPaths,
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
    assert.match(
      text,
      /^AuthorizedKeysCommand \/usr\/bin\/curl -q -sf .*--unix-socket \/srv\/hp\/sshd\/auth\/keys\.sock .*--data-urlencode uid=%U /m,
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
      'Subsystem sftp internal-sftp -u 027',
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
