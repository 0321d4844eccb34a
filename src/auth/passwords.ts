import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { Errors } from '../errors.js';

const scrypt = promisify(scryptCb) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: object,
) => Promise<Buffer>;

// scrypt parameters: N=2^cost (PASSWORD_HASH_COST, default 15: about 30-110 ms here and 32 MiB of
// memory per hash), r=8, p=1. A stored hash carries its own N, so a hash made at another cost still
// verifies (docs/decisions.md #120).
export const DEFAULT_HASH_COST = 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
/** What scrypt needs for N and r (128 * N * r bytes), with room to spare (Node refuses at the limit). */
const maxMemOf = (n: number, r: number) => 2 * 128 * n * r;

/** Hashes a password as `scrypt$N$r$p$salt$hash` (base64url parts), N = 2^cost. */
export async function hashPassword(password: string, cost = DEFAULT_HASH_COST): Promise<string> {
  const N = 2 ** cost;
  const salt = randomBytes(16);
  const hash = await scrypt(password, salt, KEY_LENGTH, { N, r: R, p: P, maxmem: maxMemOf(N, R) });
  return ['scrypt', N, R, P, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Constant-time check of a password against a stored hash; false for a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, saltText, hashText] = stored.split('$');
  if (scheme !== 'scrypt' || !saltText || !hashText) return false;
  const expected = Buffer.from(hashText, 'base64url');
  const actual = await scrypt(password, Buffer.from(saltText, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: maxMemOf(Number(n), Number(r)),
  });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export interface HashGateOptions {
  /** Verifications running at once (each one holds a libuv pool thread and 32 MiB for ~50 ms). */
  concurrency: number;
  /** Verifications waiting for a slot; one more is refused at once (503). */
  queue: number;
}

/** What a {@link HashGate} did so far (read by GET /metrics). */
export interface HashGateStats {
  /** scrypt verifications started. */
  hashes: number;
  /** Refused at once because the wait queue was full. */
  refusedBusy: number;
  /** Dropped before hashing because every client waiting for the verification had gone. */
  abandoned: number;
  running: number;
  waiting: number;
}

/**
 * Issue 20 (defect 6): at most `concurrency` password verifications at a time per process, with a
 * bounded FIFO of waiters. A full queue throws a 503 with Retry-After at once; a verification whose
 * clients are gone (`alive()` false when its turn comes) is dropped without hashing.
 */
export function createHashGate({ concurrency, queue }: HashGateOptions) {
  let running = 0;
  const waiting: (() => void)[] = [];
  const stats = { hashes: 0, refusedBusy: 0, abandoned: 0 };

  function release() {
    const next = waiting.shift();
    // The slot passes straight to the next waiter (running stays the same).
    if (next) next();
    else running--;
  }

  async function verify(password: string, stored: string, alive: () => boolean = () => true) {
    if (!alive()) {
      stats.abandoned++;
      throw Errors.unavailable('The client closed the connection before its credentials were checked');
    }
    if (running < concurrency) running++;
    else if (waiting.length >= queue) {
      stats.refusedBusy++;
      throw Errors.busy('Too many sign-ins are being checked; retry shortly', 1);
    } else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      if (!alive()) {
        stats.abandoned++;
        throw Errors.unavailable('The client closed the connection before its credentials were checked');
      }
      stats.hashes++;
      return await verifyPassword(password, stored);
    } finally {
      release();
    }
  }

  return {
    verify,
    stats: (): HashGateStats => ({ ...stats, running, waiting: waiting.length }),
  };
}

export type HashGate = ReturnType<typeof createHashGate>;

/** New credential: a readable username and a long random password (shown once). */
export function generateCredential(): { username: string; password: string } {
  return {
    username: `hp_${randomBytes(8).toString('hex')}`,
    password: randomBytes(24).toString('base64url'),
  };
}

/** Constant-time string equality (for tokens). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}
