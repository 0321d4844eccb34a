import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The OpenSSH key types the tests generate, with their node:crypto parameters. */
export type TestKeyKind = 'ed25519' | 'p256' | 'p384' | 'p521' | 'rsa2048' | 'rsa3072' | 'rsa1024';

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
/** An SSH wire `string`: uint32 length, then the bytes. */
export const sshString = (b: Buffer | string) => {
  const buf = typeof b === 'string' ? Buffer.from(b, 'latin1') : b;
  return Buffer.concat([u32(buf.length), buf]);
};
/** An SSH `mpint` of a non-negative magnitude: a leading zero when the high bit is set. */
export const sshMpint = (magnitude: Buffer) => {
  let m = magnitude;
  while (m.length > 1 && m[0] === 0) m = m.subarray(1);
  return sshString((m[0] as number) & 0x80 ? Buffer.concat([Buffer.from([0]), m]) : m);
};

const fromB64url = (s: string | undefined) => Buffer.from(s ?? '', 'base64url');

/** The OpenSSH wire blob of a public key, built from its JWK (no ssh-keygen involved). */
export function opensshBlob(key: KeyObject): { type: string; blob: Buffer } {
  const jwk = key.export({ format: 'jwk' }) as JsonWebKey;
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') {
    return {
      type: 'ssh-ed25519',
      blob: Buffer.concat([sshString('ssh-ed25519'), sshString(fromB64url(jwk.x))]),
    };
  }
  if (jwk.kty === 'EC') {
    const curve = { 'P-256': 'nistp256', 'P-384': 'nistp384', 'P-521': 'nistp521' }[jwk.crv as string];
    if (!curve) throw new Error(`unexpected curve ${jwk.crv}`);
    const type = `ecdsa-sha2-${curve}`;
    const point = Buffer.concat([Buffer.from([4]), fromB64url(jwk.x), fromB64url(jwk.y)]);
    return { type, blob: Buffer.concat([sshString(type), sshString(curve), sshString(point)]) };
  }
  if (jwk.kty === 'RSA') {
    const blob = Buffer.concat([
      sshString('ssh-rsa'),
      sshMpint(fromB64url(jwk.e)),
      sshMpint(fromB64url(jwk.n)),
    ]);
    return { type: 'ssh-rsa', blob };
  }
  throw new Error(`unexpected key type ${jwk.kty}`);
}

function generate(kind: TestKeyKind): KeyObject {
  switch (kind) {
    case 'ed25519':
      return generateKeyPairSync('ed25519').publicKey;
    case 'p256':
      return generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    case 'p384':
      return generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
    case 'p521':
      return generateKeyPairSync('ec', { namedCurve: 'P-521' }).publicKey;
    case 'rsa2048':
      return generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    case 'rsa3072':
      return generateKeyPairSync('rsa', { modulusLength: 3072 }).publicKey;
    case 'rsa1024':
      return generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
  }
}

export interface TestSshKey {
  type: string;
  blob: Buffer;
  /** `type base64 comment`, as in an authorized_keys or id_*.pub file. */
  line: string;
  comment: string;
}

/** A fresh key pair of `kind`; its public half as an OpenSSH public key line. */
export function testSshKey(kind: TestKeyKind = 'ed25519', comment = `${kind}@hostplane.test`): TestSshKey {
  const { type, blob } = opensshBlob(generate(kind));
  return { type, blob, comment, line: `${type} ${blob.toString('base64')}${comment ? ` ${comment}` : ''}` };
}

/** What `ssh-keygen -l -f FILE` prints for a public key line: `{bits, fingerprint, comment, type}`. */
export function sshKeygenFingerprint(line: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-ssh-'));
  try {
    const file = path.join(dir, 'key.pub');
    fs.writeFileSync(file, `${line}\n`);
    const out = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', file], { encoding: 'utf8' }).trim();
    const match = /^(\d+) (SHA256:\S+) (.*) \((\w+)\)$/.exec(out);
    if (!match) throw new Error(`unexpected ssh-keygen output: ${out}`);
    return {
      bits: Number(match[1]),
      fingerprint: match[2] as string,
      comment: match[3] as string,
      type: match[4],
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
