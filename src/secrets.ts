import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A secret from the environment, or else read from (or generated once into) a 0600 file in DATA_DIR.
 * `generated` is true only the first time, so the caller can print a new admin token once.
 */
export function loadOrCreateSecret(
  configured: string | null,
  dataDir: string,
  fileName: string,
): { value: string; generated: boolean } {
  if (configured) return { value: configured, generated: false };
  const file = path.join(dataDir, fileName);
  if (fs.existsSync(file)) return { value: fs.readFileSync(file, 'utf8').trim(), generated: false };
  fs.mkdirSync(dataDir, { recursive: true });
  const value = randomBytes(32).toString('base64url');
  fs.writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  return { value, generated: true };
}

/** A sealed value: format version, 12-byte IV, 16-byte GCM tag and ciphertext, each base64url. */
const SEALED = /^v1\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]+)$/;

/** Whether `value` has the shape of a sealed value (a JSON text never does: it has no `{`, `[` or `"`). */
export const isSealed = (value: string) => SEALED.test(value);

const boxKey = (secretKey: string) =>
  Buffer.from(
    hkdfSync('sha256', Buffer.from(secretKey, 'utf8'), 'hostplane', 'hostplane/v1/sealed-values', 32),
  );

/**
 * AES-256-GCM with a key derived by HKDF-SHA256 from HOSTPLANE_SECRET_KEY. Each value gets a fresh
 * random IV; `context` (e.g. the certificate id) is bound as additional data, so a sealed value
 * copied onto another row does not open. Changing the secret key makes existing values unreadable,
 * unless the old key is given as `previousKey` (HOSTPLANE_SECRET_KEY_OLD, during a rotation): values
 * then still open under it, and new ones are sealed under the new key (`hostplane reseal` moves the rest).
 */
export function createSecretBox(secretKey: string, previousKey: string | null = null) {
  const box = openWith(boxKey(secretKey));
  const previous = previousKey ? openWith(boxKey(previousKey)) : null;
  return {
    seal: box.seal,
    open(sealed: string, context: string): Buffer {
      if (!previous) return box.open(sealed, context);
      try {
        return box.open(sealed, context);
      } catch {
        return previous.open(sealed, context);
      }
    },
  };
}

export type SecretBox = ReturnType<typeof createSecretBox>;

/**
 * `hostplane reseal`: a sealed value under the new key, or null when it already is (so a rerun
 * changes nothing). Throws when the value opens under neither key.
 */
export function createResealer(oldKey: string, newKey: string) {
  const fresh = openWith(boxKey(newKey));
  const old = openWith(boxKey(oldKey));
  return (sealed: string, context: string): string | null => {
    try {
      fresh.open(sealed, context);
      return null;
    } catch {
      // Not under the new key: it must open under the old one.
    }
    try {
      return fresh.seal(old.open(sealed, context), context);
    } catch {
      throw new Error(`the sealed value of ${context} opens under neither the old nor the new key`);
    }
  };
}

export type Resealer = ReturnType<typeof createResealer>;

/** What a `hostplane reseal` pass did: values sealed again under the new key, values already under it. */
export interface ResealCount {
  resealed: number;
  current: number;
}

/**
 * One pass of `hostplane reseal` over rows: each row's sealed value (`sealedOf`: the value and its
 * context, or null to skip the row) sealed again, and written back with `write` when it changed;
 * counted into `count` (a fresh one by default), which is returned.
 */
export async function resealEach<T>(
  rows: Iterable<T>,
  reseal: Resealer,
  sealedOf: (row: T) => { sealed: string; context: string } | null,
  write: (row: T, next: string) => Promise<unknown>,
  count: ResealCount = { resealed: 0, current: 0 },
): Promise<ResealCount> {
  for (const row of rows) {
    const value = sealedOf(row);
    if (value === null) continue;
    const next = reseal(value.sealed, value.context);
    if (next === null) count.current++;
    else {
      await write(row, next);
      count.resealed++;
    }
  }
  return count;
}

function openWith(key: Buffer) {
  return {
    seal(plaintext: Buffer, context: string): string {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      const parts = [iv, cipher.getAuthTag(), ciphertext].map((b) => b.toString('base64url'));
      return `v1.${parts.join('.')}`;
    },
    /** Throws when the value was altered, sealed under another key or for another context. */
    open(sealed: string, context: string): Buffer {
      const match = SEALED.exec(sealed);
      if (!match?.[1] || !match[2] || !match[3]) throw new Error('not a sealed value');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(match[1], 'base64url'));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(Buffer.from(match[2], 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(match[3], 'base64url')), decipher.final()]);
    },
  };
}

/**
 * HMAC-SHA256 under a key derived by HKDF from HOSTPLANE_SECRET_KEY for one `purpose` (signed
 * archive links, LargeFS validation files), so no two uses share a key. `verify` is constant-time.
 */
export function createSigner(secretKey: string, purpose: string) {
  const key = Buffer.from(
    hkdfSync('sha256', Buffer.from(secretKey, 'utf8'), 'hostplane', `hostplane/v1/${purpose}`, 32),
  );
  const sign = (data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
  return {
    sign,
    verify(data: string, signature: Buffer): boolean {
      const expected = sign(data);
      return signature.length === expected.length && timingSafeEqual(signature, expected);
    },
  };
}

export type Signer = ReturnType<typeof createSigner>;
