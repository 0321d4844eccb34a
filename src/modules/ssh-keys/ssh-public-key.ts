import { createHash, createPublicKey } from 'node:crypto';

/** The key types accepted (K1 decision): ed25519, the three NIST ECDSA curves, RSA of 2048+ bits. */
export const SSH_KEY_TYPES = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
] as const;
export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

export const MIN_RSA_BITS = 2048;
const MAX_RSA_BITS = 16384;

/** Why a public key is refused; each is a field error code on `public_key`. */
export type SshKeyProblem =
  | 'malformed_public_key'
  | 'unsupported_key_type'
  | 'key_type_mismatch'
  | 'truncated_public_key'
  | 'invalid_key_data'
  | 'key_too_short';

export class SshKeyError extends Error {
  constructor(
    readonly problem: SshKeyProblem,
    message: string,
  ) {
    super(message);
    this.name = 'SshKeyError';
  }
}

export interface SshPublicKey {
  type: SshKeyType;
  /** The decoded wire-format blob. */
  blob: Buffer;
  /** Modulus bits (RSA), curve bits (ECDSA) or 256 (ed25519), as ssh-keygen prints them. */
  bits: number;
  comment: string;
  /** `SHA256:` + unpadded base64 of sha256(blob), exactly as `ssh-keygen -l` prints it. */
  fingerprint: string;
  /** `type base64` without the comment. */
  canonical: string;
}

const CURVES = {
  'ecdsa-sha2-nistp256': { name: 'nistp256', jwk: 'P-256', bytes: 32, bits: 256 },
  'ecdsa-sha2-nistp384': { name: 'nistp384', jwk: 'P-384', bytes: 48, bits: 384 },
  'ecdsa-sha2-nistp521': { name: 'nistp521', jwk: 'P-521', bytes: 66, bits: 521 },
} as const;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Reads the length-prefixed fields of an SSH wire-format blob (RFC 4251 §5). */
class WireReader {
  private offset = 0;
  constructor(private readonly buf: Buffer) {}

  string(what: string): Buffer {
    if (this.offset + 4 > this.buf.length) throw truncated(what);
    const length = this.buf.readUInt32BE(this.offset);
    const start = this.offset + 4;
    if (length > this.buf.length - start) throw truncated(what);
    this.offset = start + length;
    return this.buf.subarray(start, this.offset);
  }

  /** An mpint that must be positive and minimally encoded; returns its magnitude bytes. */
  positiveMpint(what: string): Buffer {
    const raw = this.string(what);
    if (raw.length === 0 || (raw[0] as number) & 0x80) {
      throw new SshKeyError('invalid_key_data', `The key's ${what} is not a positive integer`);
    }
    if (raw[0] === 0 && (raw.length === 1 || !((raw[1] as number) & 0x80))) {
      throw new SshKeyError('invalid_key_data', `The key's ${what} is not minimally encoded`);
    }
    return raw[0] === 0 ? raw.subarray(1) : raw;
  }

  end() {
    if (this.offset !== this.buf.length) {
      throw new SshKeyError('invalid_key_data', 'The key data has bytes after its last field');
    }
  }
}

const truncated = (what: string) =>
  new SshKeyError('truncated_public_key', `The key data ends inside its ${what}: it is truncated`);

function bitLength(magnitude: Buffer): number {
  const top = magnitude[0] as number;
  return (magnitude.length - 1) * 8 + (32 - Math.clz32(top));
}

/** Checks the fields after the type name; answers the key size in bits. */
function checkFields(type: SshKeyType, r: WireReader): number {
  if (type === 'ssh-ed25519') {
    const point = r.string('public point');
    if (point.length !== 32) {
      throw new SshKeyError('invalid_key_data', `An ed25519 key is 32 bytes, not ${point.length}`);
    }
    return 256;
  }
  if (type === 'ssh-rsa') {
    const e = r.positiveMpint('exponent');
    const n = r.positiveMpint('modulus');
    if (!((e[e.length - 1] as number) & 1) || bitLength(e) < 2 || e.length > 8) {
      throw new SshKeyError(
        'invalid_key_data',
        'The RSA exponent must be odd, at least 3 and at most 64 bits',
      );
    }
    const bits = bitLength(n);
    if (bits < MIN_RSA_BITS) {
      throw new SshKeyError(
        'key_too_short',
        `RSA keys need at least ${MIN_RSA_BITS} bits; this one has ${bits}`,
      );
    }
    if (bits > MAX_RSA_BITS) {
      throw new SshKeyError('invalid_key_data', `RSA keys of more than ${MAX_RSA_BITS} bits are refused`);
    }
    return bits;
  }
  const curve = CURVES[type];
  const name = r.string('curve name').toString('latin1');
  if (name !== curve.name) {
    throw new SshKeyError('key_type_mismatch', `A ${type} key names curve ${curve.name}, not "${name}"`);
  }
  const q = r.string('public point');
  if (q.length !== 1 + 2 * curve.bytes || q[0] !== 0x04) {
    throw new SshKeyError(
      'invalid_key_data',
      `A ${curve.name} public point is ${1 + 2 * curve.bytes} bytes starting with 0x04 (uncompressed)`,
    );
  }
  try {
    // Node refuses a point that is not on the curve.
    const b64url = (b: Buffer) => b.toString('base64url');
    createPublicKey({
      key: {
        kty: 'EC',
        crv: curve.jwk,
        x: b64url(q.subarray(1, 1 + curve.bytes)),
        y: b64url(q.subarray(1 + curve.bytes)),
      },
      format: 'jwk',
    });
  } catch {
    throw new SshKeyError('invalid_key_data', `The public point is not on curve ${curve.name}`);
  }
  return curve.bits;
}

/**
 * Parses an OpenSSH public key line `type base64 [comment]` from its wire format (RFC 4253 §6.6,
 * RFC 5656 §3.1, RFC 8709 §4), not by pattern: the blob's own type must match the line's, every
 * field must be present and sized for the type, and nothing may follow the last field.
 */
export function parseSshPublicKey(line: string): SshPublicKey {
  const trimmed = line.trim();
  if (/[\r\n]/.test(trimmed)) {
    throw new SshKeyError('malformed_public_key', 'Give one public key on one line');
  }
  const match = /^(\S+)\s+(\S+)(?:\s+(.*))?$/.exec(trimmed);
  if (!match) {
    throw new SshKeyError('malformed_public_key', 'A public key is "<type> <base64 key data> [comment]"');
  }
  const [, typeText = '', data = '', comment = ''] = match;
  if (!(SSH_KEY_TYPES as readonly string[]).includes(typeText)) {
    throw new SshKeyError(
      'unsupported_key_type',
      `Key type "${typeText.slice(0, 40)}" is not accepted; use one of ${SSH_KEY_TYPES.join(', ')}`,
    );
  }
  const type = typeText as SshKeyType;
  if (data.length % 4 !== 0 || !BASE64.test(data)) {
    throw new SshKeyError('malformed_public_key', 'The key data is not valid base64');
  }
  const blob = Buffer.from(data, 'base64');
  const reader = new WireReader(blob);
  const inner = reader.string('key type').toString('latin1');
  if (inner !== type) {
    throw new SshKeyError('key_type_mismatch', `The key data is a "${inner.slice(0, 40)}" key, not ${type}`);
  }
  const bits = checkFields(type, reader);
  reader.end();
  const digest = createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
  return {
    type,
    blob,
    bits,
    comment: comment.trim(),
    fingerprint: `SHA256:${digest}`,
    canonical: `${type} ${blob.toString('base64')}`,
  };
}
