import { createHmac, randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import type { Caller, Membership } from './access.js';
import { bumpEpoch, findCredential, loadMemberships, readEpoch, readFreshness } from './auth.repo.js';
import { DUMMY_HASH_PROMISE, verifyPassword } from './passwords.js';

export interface AuthenticatorOptions {
  db: Db;
  clock: Clock;
  /** How long a verified pair and its memberships are reused; default 10 s. 0 disables the cache. */
  cacheSeconds: number;
  /** Most cached pairs; default 10,000. */
  maxEntries?: number;
}

/** How often a process re-reads the membership epoch (at most; never more often than the cache lives). */
const EPOCH_CHECK_MS = 1000;

/**
 * Verifies Basic credentials. A verified (username, password) pair is cached for a few seconds under
 * an HMAC of the pair (keyed per process), so a request costs no scrypt hash and the cache never
 * holds a password.
 *
 * Membership changes must take effect at once (U, T11): the transaction that makes one calls
 * `membershipsChanged(tx)`, which bumps a one-row epoch, and then `invalidate()` clears this
 * process's cache. Every other process re-reads the epoch at most once a second (`sync()`, awaited by
 * the auth hook before a cached caller is used) and drops its cache when it moved, so a change is
 * seen everywhere within about a second, not AUTH_CACHE_SECONDS (decisions.md #7).
 */
export function createAuthenticator({ db, clock, cacheSeconds, maxEntries = 10_000 }: AuthenticatorOptions) {
  const cacheKey = randomBytes(32);
  const cache = new Map<string, { caller: Caller; expires: number }>();
  // Bumped by every local invalidation; a caller taken from the cache before one is not used.
  let generation = 0;
  const generationOf = new WeakMap<Caller, number>();
  let epoch: number | null = null;
  let epochCheckedAt = Number.NEGATIVE_INFINITY;
  let epochRead: Promise<void> | null = null;
  const checkMs = Math.min(EPOCH_CHECK_MS, cacheSeconds * 1000);

  function invalidate() {
    generation++;
    cache.clear();
  }

  /** Re-reads the epoch when the last read is older than a second; clears the cache when it moved. */
  async function sync(): Promise<void> {
    if (cacheSeconds === 0 || clock.now().getTime() - epochCheckedAt < checkMs) return;
    epochRead ??= (async () => {
      try {
        const checkedAt = clock.now().getTime();
        const current = await readEpoch(db);
        if (epoch !== null && current !== epoch) invalidate();
        epoch = current;
        epochCheckedAt = checkedAt;
      } finally {
        epochRead = null;
      }
    })();
    await epochRead;
  }

  async function loadCaller(userId: string, username: string): Promise<Caller> {
    const { rows, scoped } = await loadMemberships(db, userId);
    const memberships = new Map<string, Membership>();
    for (const row of rows) {
      const { roles } = row;
      const partial = roles.startsWith('partial');
      const installIds = partial
        ? new Set(scoped.filter((s) => s.account_id === row.account_id).map((s) => s.install_id))
        : null;
      memberships.set(row.account_id, { accountId: row.account_id, roles, installIds });
    }
    return { userId, username, memberships };
  }

  const keyOf = (username: string, password: string) =>
    createHmac('sha256', cacheKey).update(username).update('\0').update(password).digest('base64');

  /** The caller of a pair verified within `cacheSeconds`, or null: no hashing, no query. */
  function cached(username: string, password: string): Caller | null {
    const key = keyOf(username, password);
    const hit = cache.get(key);
    if (!hit) return null;
    if (hit.expires > clock.now().getTime()) return hit.caller;
    cache.delete(key);
    return null;
  }

  async function verify(username: string, password: string): Promise<Caller | null> {
    const hit = cached(username, password);
    if (hit) return hit;
    const key = keyOf(username, password);
    const now = clock.now().getTime();
    const credential = await findCredential(db, username);
    const ok = await verifyPassword(password, credential?.password_hash ?? (await DUMMY_HASH_PROMISE()));
    if (!credential || !ok) return null;
    const caller = await loadCaller(credential.user_id, username);
    if (cacheSeconds > 0) {
      if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
      cache.set(key, { caller, expires: now + cacheSeconds * 1000 });
      generationOf.set(caller, generation);
    }
    return caller;
  }

  /**
   * Issue 14 (read cache): the membership epoch and the data versions of `accountIds` in one lookup.
   * When the epoch moved, this process's cached callers are dropped at once (not within a second as
   * with `sync`) and `epochMoved` tells the caller to verify its credentials again.
   */
  async function freshness(accountIds: string[]): Promise<{ versions: string; epochMoved: boolean }> {
    const checkedAt = clock.now().getTime();
    const { epoch: current, versions } = await readFreshness(db, accountIds);
    const epochMoved = epoch !== null && current !== epoch;
    if (epochMoved) invalidate();
    if (epoch === null || epochMoved) {
      epoch = current;
      epochCheckedAt = checkedAt;
    }
    return { versions, epochMoved };
  }

  return {
    verify,
    cached,
    sync,
    freshness,
    /** True for a caller taken from the cache before the last invalidation (verify it again). */
    isStale: (caller: Caller) => generationOf.has(caller) && generationOf.get(caller) !== generation,
    /** False for a caller taken from the cache before the last invalidation (verify it again). */
    isCurrent: (caller: Caller) => generationOf.get(caller) === generation,
    /** In the transaction that changes memberships or credentials: every process will notice. */
    membershipsChanged: (tx: Db) => bumpEpoch(tx),
    /** Drops every cached pair of this process (after a membership or credential change commits). */
    invalidate,
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
