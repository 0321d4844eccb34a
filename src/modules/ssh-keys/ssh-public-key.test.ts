import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  sshKeygenFingerprint,
  sshMpint,
  sshString,
  type TestKeyKind,
  testSshKey,
} from '../../../test/support/ssh-keys.js';
import { parseSshPublicKey, type SshKeyProblem } from './ssh-public-key.js';

const problemOf = (line: string): SshKeyProblem | 'accepted' => {
  try {
    parseSshPublicKey(line);
    return 'accepted';
  } catch (err) {
    return (err as { problem: SshKeyProblem }).problem;
  }
};

const lineOf = (type: string, blob: Buffer, comment = '') =>
  `${type} ${blob.toString('base64')}${comment ? ` ${comment}` : ''}`;

describe('parseSshPublicKey', () => {
  const kinds: [TestKeyKind, number][] = [
    ['ed25519', 256],
    ['p256', 256],
    ['p384', 384],
    ['p521', 521],
    ['rsa2048', 2048],
    ['rsa3072', 3072],
  ];
  for (const [kind, bits] of kinds) {
    it(`K1 accepts a generated ${kind} key; fingerprint, bits and comment match ssh-keygen -l`, () => {
      const key = testSshKey(kind, `${kind} test key`);
      const parsed = parseSshPublicKey(key.line);
      const keygen = sshKeygenFingerprint(key.line);
      assert.equal(parsed.type, key.type);
      assert.equal(parsed.fingerprint, keygen.fingerprint);
      assert.equal(parsed.bits, keygen.bits);
      assert.equal(parsed.bits, bits);
      assert.equal(parsed.comment, `${kind} test key`);
      assert.equal(parsed.canonical, `${key.type} ${key.blob.toString('base64')}`);
      const digest = createHash('sha256').update(key.blob).digest('base64').replace(/=+$/, '');
      assert.equal(parsed.fingerprint, `SHA256:${digest}`);
    });
  }

  it('keeps an empty comment and surrounding whitespace out', () => {
    const key = testSshKey('ed25519', '');
    const parsed = parseSshPublicKey(`  ${key.line}\n`);
    assert.equal(parsed.comment, '');
  });

  it('refuses a 1024-bit RSA key as too short', () => {
    assert.equal(problemOf(testSshKey('rsa1024').line), 'key_too_short');
  });

  it('refuses unsupported types, a missing blob, bad base64 and several lines', () => {
    const key = testSshKey('ed25519');
    assert.equal(problemOf(key.line.replace('ssh-ed25519', 'ssh-dss')), 'unsupported_key_type');
    assert.equal(problemOf('ssh-ed25519'), 'malformed_public_key');
    assert.equal(problemOf(''), 'malformed_public_key');
    assert.equal(problemOf('ssh-ed25519 AAAA*C3NzaC1lZDI1NTE5'), 'malformed_public_key');
    assert.equal(problemOf('ssh-ed25519 AAAAC3NzaC1lZDI1NTE'), 'malformed_public_key');
    assert.equal(problemOf(`${key.line}\n${key.line}`), 'malformed_public_key');
  });

  it('refuses truncated key data of every type', () => {
    for (const kind of ['ed25519', 'p256', 'p521', 'rsa2048'] as const) {
      const key = testSshKey(kind);
      for (const cut of [3, 10, key.blob.length - 1]) {
        // Valid base64 of a cut blob: only the wire format can tell.
        const short = key.blob.subarray(0, cut);
        assert.equal(problemOf(lineOf(key.type, short)), 'truncated_public_key', `${kind} cut at ${cut}`);
      }
    }
  });

  it('refuses a blob whose own type differs from the line, or names another curve', () => {
    const ed = testSshKey('ed25519');
    assert.equal(problemOf(lineOf('ssh-rsa', ed.blob)), 'key_type_mismatch');
    const p256 = testSshKey('p256');
    assert.equal(problemOf(lineOf('ecdsa-sha2-nistp384', p256.blob)), 'key_type_mismatch');
    // The right outer and inner type, but the curve field names another curve.
    const point = p256.blob.subarray(p256.blob.length - 65);
    const wrongCurve = Buffer.concat([
      sshString('ecdsa-sha2-nistp256'),
      sshString('nistp384'),
      sshString(point),
    ]);
    assert.equal(problemOf(lineOf('ecdsa-sha2-nistp256', wrongCurve)), 'key_type_mismatch');
  });

  it('refuses wrong field sizes, a point off the curve, trailing bytes and bad RSA integers', () => {
    const wrongEd = Buffer.concat([sshString('ssh-ed25519'), sshString(Buffer.alloc(31, 1))]);
    assert.equal(problemOf(lineOf('ssh-ed25519', wrongEd)), 'invalid_key_data');
    const offCurve = Buffer.concat([
      sshString('ecdsa-sha2-nistp256'),
      sshString('nistp256'),
      sshString(Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 7)])),
    ]);
    assert.equal(problemOf(lineOf('ecdsa-sha2-nistp256', offCurve)), 'invalid_key_data');
    const compressed = Buffer.concat([
      sshString('ecdsa-sha2-nistp256'),
      sshString('nistp256'),
      sshString(Buffer.concat([Buffer.from([2]), Buffer.alloc(32, 7)])),
    ]);
    assert.equal(problemOf(lineOf('ecdsa-sha2-nistp256', compressed)), 'invalid_key_data');
    const ed = testSshKey('ed25519');
    assert.equal(
      problemOf(lineOf('ssh-ed25519', Buffer.concat([ed.blob, Buffer.from([0])]))),
      'invalid_key_data',
    );
    const n = Buffer.alloc(256, 0xff);
    const evenE = Buffer.concat([
      sshString('ssh-rsa'),
      sshMpint(Buffer.from([0x01, 0x00, 0x00])),
      sshMpint(n),
    ]);
    assert.equal(problemOf(lineOf('ssh-rsa', evenE)), 'invalid_key_data');
    const negativeN = Buffer.concat([sshString('ssh-rsa'), sshMpint(Buffer.from([1, 0, 1])), sshString(n)]);
    assert.equal(problemOf(lineOf('ssh-rsa', negativeN)), 'invalid_key_data');
    const good = Buffer.concat([sshString('ssh-rsa'), sshMpint(Buffer.from([1, 0, 1])), sshMpint(n)]);
    assert.equal(problemOf(lineOf('ssh-rsa', good)), 'accepted');
  });
});
