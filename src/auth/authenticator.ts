import { createHash, hash, randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import { Errors } from '../errors.js';
import type { Caller, CredentialGrant, Membership } from './access.js';
import { type AttemptLimits, createAttemptLimiter } from './attempts.js';
import {
  bumpEpoch,
  findCredential,
  findScopedCredential,
  loadMemberships,
  readEpoch,
  readFreshness,
} from './auth.repo.js';
import { credentialIdOf, narrow, verifySecret } from './credentials.js';
import {
  createHashGate,
  DEFAULT_HASH_COST,
  type HashGateOptions,
  type HashGateStats,
  hashPassword,
} from './passwords.js';

export interface AuthenticatorOptions {
  db: Db;
  clock: Clock;
  /** How long a verified pair and its memberships are reused; default 10 s. 0 disables the cache. */
  cacheSeconds: number;
  /** Most cached pairs; default 10,000. */
  maxEntries?: number;
  /** Issue 20: scrypt verifications at once and waiting (default 2 and 64). */
  hashing?: HashGateOptions;
  /** Issue 20: failed sign-ins counted before a hash is spent (default: none counted). */
  failures?: AttemptLimits | null;
  /** PASSWORD_HASH_COST: new password hashes (and the unknown-username dummy) use N = 2^cost (default 15). */
  hashCost?: number;
}

/** Who asks for a verification (the auth hook): the client address, and whether it is still there. */
export interface VerifyContext {
  /** The client address: failed sign-ins are counted per address (attempts.ts). */
  ip?: string;
  /** False once the client has gone: a verification nobody waits for is not hashed. */
  alive?: () => boolean;
}

/** What the authenticator did so far (GET /metrics). */
export interface AuthenticatorStats extends HashGateStats {
  /** Verifications refused with a 429 by the failed sign-in limits, before any hash. */
  refusedFailures: number;
  /** Background re-checks of a cached pair near the end of its life that ended (refresh ahead, no hash). */
  refreshes: number;
  /** Wrong pairs answered 401 without a hash: already found not to match the same stored hash. */
  mismatchesRemembered: number;
}

/** SHA-256 (base64) of a string: one-shot `crypto.hash` where Node has it (20.12+). */
const sha256: (text: string) => string =
  typeof hash === 'function'
    ? (text) => hash('sha256', text, 'base64')
    : (text) => createHash('sha256').update(text).digest('base64');

/** How often a process re-reads the membership epoch (at most; never more often than the cache lives). */
const EPOCH_CHECK_MS = 1000;
/** Refresh ahead: a pair used when less than this part of its life remains is re-checked in the background. */
const REFRESH_WHEN_LEFT = 1 / 3;
/** How often a verification that saw an invalidation reloads before it answers uncached. */
const RELOADS = 3;

interface Entry {
  caller: Caller;
  username: string;
  /** The stored hash the password was verified against: unchanged, the password still matches it. */
  passwordHash: string;
  refreshAt: number;
  expires: number;
  refreshing: boolean;
}

interface Flight {
  promise: Promise<Caller | null>;
  /** The clients waiting for it: it is hashed only while one of them is still there. */
  watchers: Set<() => boolean>;
  /** Addresses whose failure it was counted for: one guess per address, however many requests shared it. */
  counted: Set<string>;
}

/**
 * Verifies Basic credentials. A verified (username, password) pair is cached for a few seconds under
 * an HMAC of the pair (keyed per process), so a request costs no scrypt hash and the cache never
 * holds a password.
 *
 * Issue 20 (docs/decisions.md #76): one verification per pair at a time (single flight: later
 * requests await the same promise; a failure is never cached); a pair used in the last third of its
 * life is re-checked once in the background (refresh ahead: the stored hash it was verified against
 * is read again, no scrypt), so a busy credential never sees an expiry; hashes go through a bounded
 * gate (passwords.ts), and failed sign-ins are counted before a hash is spent (attempts.ts).
 *
 * Membership changes must take effect at once (U, T11): the transaction that makes one calls
 * `membershipsChanged(tx)`, which bumps a one-row epoch, and then `invalidate()` clears this
 * process's cache. Every other process re-reads the epoch at most once a second (`sync()`, awaited by
 * the auth hook before a cached caller is used) and drops its cache when it moved, so a change is
 * seen everywhere within about a second, not AUTH_CACHE_SECONDS (decisions.md #7). An invalidation
 * always wins: a verification or refresh that started before one never stores its result, and
 * reloads the credential and memberships before it answers.
 */
export function createAuthenticator({
  db,
  clock,
  cacheSeconds,
  maxEntries = 10_000,
  hashing = { concurrency: 2, queue: 64 },
  failures = null,
  hashCost = DEFAULT_HASH_COST,
}: AuthenticatorOptions) {
  // A hash of a password nobody has, at this process's cost: verified when the username is unknown,
  // so that timing tells nothing (made once, at the first such request).
  let dummy: Promise<string> | null = null;
  const dummyHash = () => {
    dummy ??= hashPassword(randomBytes(16).toString('hex'), hashCost);
    return dummy;
  };
  const cacheKey = randomBytes(32);
  const cache = new Map<string, Entry>();
  // Issue 20 (docs/decisions.md #111): pairs that did NOT match, each with the stored hash it was
  // checked against (null: no such username, checked against the dummy hash). scrypt is
  // deterministic, so the same pair against the same stored hash fails again: answered without a
  // hash while the stored hash is unchanged, for at most the cache's lifetime. Every new guess is a
  // new pair and costs its hash as before; failed attempts are still counted (attempts.ts).
  const mismatches = new Map<string, { storedHash: string | null; expires: number }>();
  const flights = new Map<string, Flight>();
  const gate = createHashGate(hashing);
  const attempts = failures ? createAttemptLimiter(clock, failures) : null;
  const counts = { refusedFailures: 0, refreshes: 0, mismatchesRemembered: 0 };
  const lifeMs = cacheSeconds * 1000;
  // Bumped by every local invalidation; a caller taken from the cache before one is not used.
  let generation = 0;
  const generationOf = new WeakMap<Caller, number>();
  let epoch: number | null = null;
  let epochCheckedAt = Number.NEGATIVE_INFINITY;
  let epochRead: Promise<void> | null = null;
  const checkMs = Math.min(EPOCH_CHECK_MS, lifeMs);

  function invalidate() {
    generation++;
    cache.clear();
  }

  /**
   * Re-reads the epoch when the last read is older than a second; clears the cache when it moved.
   * Undefined when no read is due (every request asks: no promise then, issue 29).
   */
  function sync(): Promise<void> | undefined {
    if (cacheSeconds === 0 || clock.now().getTime() - epochCheckedAt < checkMs) return undefined;
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
    return epochRead;
  }

  /**
   * Issue 22: the stored credential of a username: a password's (scrypt) or, for `hpk_` names, a
   * scoped credential's (SHA-256 of a random secret, with what it grants).
   */
  async function findAny(username: string) {
    const id = credentialIdOf(username);
    if (id === null) {
      const row = await findCredential(db, username);
      return row && { user_id: row.user_id, password_hash: row.password_hash, grant: null };
    }
    const row = await findScopedCredential(db, id);
    if (!row) return null;
    const grant: CredentialGrant = {
      id: row.id,
      accountId: row.account_id,
      scope: row.scope,
      installIds: row.install_ids,
      expiresAt: row.expires_at?.getTime() ?? null,
      allowedCidrs: row.allowed_cidrs,
    };
    return { user_id: row.user_id, password_hash: row.secret_hash, grant };
  }

  async function loadCaller(
    userId: string,
    username: string,
    grant: CredentialGrant | null = null,
  ): Promise<Caller> {
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
    const caller: Caller = { userId, username, memberships };
    return grant ? narrow(caller, grant) : caller;
  }

  // A keyed SHA-256 of the pair (secret prefix; neither part holds a NUL, parseBasic refuses it): the
  // key is only ever a map key, never shown, so HMAC's nesting buys nothing here, and one-shot
  // `hash` costs about a quarter of `createHmac` on every request (bench/README.md, issue 20).
  const secret = cacheKey.toString('hex');
  const keyOf = (username: string, password: string) => sha256(`${secret}\0${username}\0${password}`);

  /**
   * Stores a pair checked at `checkedAt` under the generation it started in, unless an invalidation
   * came since (then nothing is stored: the invalidation wins).
   */
  function store(key: string, caller: Caller, passwordHash: string, since: number, checkedAt: number) {
    generationOf.set(caller, since);
    if (cacheSeconds === 0 || since !== generation) return;
    cache.delete(key);
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value as string);
    cache.set(key, {
      caller,
      username: caller.username,
      passwordHash,
      refreshAt: checkedAt + lifeMs * (1 - REFRESH_WHEN_LEFT),
      expires: checkedAt + lifeMs,
      refreshing: false,
    });
  }

  /**
   * Refresh ahead: re-reads the credential and memberships of a cached pair. The password matched
   * `entry.passwordHash`; while the stored hash is the same, it still does (no scrypt). A changed or
   * removed credential drops the pair; an error leaves it to live out its life (one try per entry).
   */
  async function refresh(key: string, entry: Entry) {
    const since = generation;
    const checkedAt = clock.now().getTime();
    try {
      const credential = await findAny(entry.username);
      if (!credential || credential.password_hash !== entry.passwordHash) {
        if (cache.get(key) === entry) cache.delete(key);
        return;
      }
      const caller = await loadCaller(credential.user_id, entry.username, credential.grant);
      store(key, caller, entry.passwordHash, since, checkedAt);
      counts.refreshes++;
    } catch {
      // The entry expires as it would have; the next use after that verifies again.
    }
  }

  function lookup(key: string): Caller | null {
    const hit = cache.get(key);
    if (!hit) return null;
    const now = clock.now().getTime();
    if (hit.expires <= now) {
      cache.delete(key);
      return null;
    }
    if (!hit.refreshing && now >= hit.refreshAt) {
      hit.refreshing = true;
      void refresh(key, hit);
    }
    return hit.caller;
  }

  /** The caller of a pair verified within `cacheSeconds`, or null: no hashing, no query. */
  function cached(username: string, password: string): Caller | null {
    return lookup(keyOf(username, password));
  }

  /** True when this pair was already found not to match this stored hash, within the cache's life. */
  function knownMismatch(key: string, storedHash: string | null): boolean {
    const seen = mismatches.get(key);
    if (!seen) return false;
    if (seen.expires > clock.now().getTime() && seen.storedHash === storedHash) {
      counts.mismatchesRemembered++;
      return true;
    }
    mismatches.delete(key);
    return false;
  }

  function rememberMismatch(key: string, storedHash: string | null) {
    if (cacheSeconds === 0) return;
    mismatches.delete(key);
    if (mismatches.size >= maxEntries) mismatches.delete(mismatches.keys().next().value as string);
    mismatches.set(key, { storedHash, expires: clock.now().getTime() + lifeMs });
  }

  /** One verification of a pair: hash (through the gate), memberships, and the cache when still current. */
  async function check(key: string, username: string, password: string, flight: Flight) {
    let since = generation;
    const checkedAt = clock.now().getTime();
    const alive = () => {
      for (const watcher of flight.watchers) if (watcher()) return true;
      return false;
    };
    const credential = await findAny(username);
    // A scoped credential's secret is random: one SHA-256, no scrypt (credentials.ts).
    if (credential?.grant) {
      if (!verifySecret(password, credential.password_hash)) return null;
    } else {
      const storedHash = credential?.password_hash ?? null;
      if (knownMismatch(key, storedHash)) return null;
      const ok = await gate.verify(password, storedHash ?? (await dummyHash()), alive);
      if (!ok) {
        rememberMismatch(key, storedHash);
        return null;
      }
    }
    if (!credential) return null;
    let caller = await loadCaller(credential.user_id, username, credential.grant);
    // An invalidation during the check: read again what it may have changed (no second hash).
    for (let i = 0; i < RELOADS && since !== generation; i++) {
      since = generation;
      const again = await findAny(username);
      if (!again || again.password_hash !== credential.password_hash) return null;
      caller = await loadCaller(again.user_id, username, again.grant);
    }
    store(key, caller, credential.password_hash, since, checkedAt);
    return caller;
  }

  async function verify(username: string, password: string, context: VerifyContext = {}) {
    const key = keyOf(username, password);
    const hit = lookup(key);
    if (hit) return hit;
    const { ip } = context;
    let flight = flights.get(key);
    if (!flight) {
      // Only a new verification is refused: joining one in flight costs no hash.
      const wait = ip && attempts ? attempts.blocked(ip, username) : 0;
      if (wait > 0) {
        counts.refusedFailures++;
        throw Errors.tooManyRequests(`Too many failed sign-ins; retry in ${wait} seconds`, wait);
      }
      const made: Flight = { promise: Promise.resolve(null), watchers: new Set(), counted: new Set() };
      made.promise = check(key, username, password, made).finally(() => {
        if (flights.get(key) === made) flights.delete(key);
      });
      flights.set(key, made);
      flight = made;
    }
    const watcher = context.alive ?? (() => true);
    flight.watchers.add(watcher);
    let caller: Caller | null;
    try {
      caller = await flight.promise;
    } finally {
      flight.watchers.delete(watcher);
    }
    if (ip && attempts) {
      if (caller) attempts.succeeded(ip, username);
      else if (!flight.counted.has(ip)) {
        flight.counted.add(ip);
        attempts.failed(ip, username);
      }
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
    /**
     * Issue 29 (decision 218): the cache's key of a pair (a keyed SHA-256, never the pair), so that a
     * connection that sends the same header again can skip decoding and hashing it: `cachedByKey`.
     */
    keyOf,
    /** {@link cached} for a key from `keyOf`: the same lookup, expiry and refresh ahead. */
    cachedByKey: (key: string): Caller | null => lookup(key),
    /** A new credential's stored hash, at this process's cost (PASSWORD_HASH_COST). */
    hashPassword: (password: string) => hashPassword(password, hashCost),
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
    /** Counters for GET /metrics (hostplane_password_hashes_total, hostplane_auth_refused_total). */
    stats: (): AuthenticatorStats => ({ ...gate.stats(), ...counts }),
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
