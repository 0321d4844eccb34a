import type { Clock } from '../clock.js';

export interface AttemptLimits {
  /** The fixed window failures are counted in. */
  failureWindowSeconds: number;
  /** Failures from one client address (0: no limit). */
  failuresPerIp: number;
  /** Failures for one username from one address (0: no limit). */
  failuresPerIpUser: number;
  /** Failures for one username from every address (0: no limit); addresses it signed in from pass. */
  failuresPerUser: number;
}

/** How long a successful sign-in makes its (address, username) pair "known" (exempt from the looser limits). */
const KNOWN_MS = 24 * 60 * 60 * 1000;

/**
 * Issue 20 (defect 6), docs/decisions.md #76: failed sign-ins counted per client address, per
 * (address, username) and per username, checked before a password hash is spent. Fixed windows on
 * the service clock; every map is bounded (oldest out), so rotating addresses costs memory only up
 * to `maxEntries`.
 *
 * - (address, username) over its limit: refused, whatever else is true.
 * - address, or username, over its limit: refused unless this address signed in as this user within
 *   the last day. So a flood from one address stops after a few guesses, a flood at one username from
 *   many addresses cannot lock its owner out of the addresses the owner uses.
 */
export function createAttemptLimiter(clock: Clock, limits: AttemptLimits, maxEntries = 100_000) {
  const windowMs = limits.failureWindowSeconds * 1000;
  const counters = new Map<string, { start: number; count: number }>();
  const known = new Map<string, number>();

  const pairOf = (ip: string, username: string) => `${ip}\0${username}`;

  function bounded<V>(map: Map<string, V>) {
    while (map.size > maxEntries) map.delete(map.keys().next().value as string);
  }

  /** Seconds until the window of `key` ends when it holds `limit` failures or more; else 0. */
  function over(key: string, limit: number, now: number): number {
    if (limit === 0) return 0;
    const counter = counters.get(key);
    if (!counter) return 0;
    if (now - counter.start >= windowMs) {
      counters.delete(key);
      return 0;
    }
    return counter.count >= limit ? Math.max(1, Math.ceil((counter.start + windowMs - now) / 1000)) : 0;
  }

  function bump(key: string, now: number) {
    const counter = counters.get(key);
    if (counter && now - counter.start < windowMs) counter.count++;
    else {
      counters.delete(key);
      counters.set(key, { start: now, count: 1 });
      bounded(counters);
    }
  }

  return {
    /** Seconds to wait when a verification of `username` from `ip` must not start now; else 0. */
    blocked(ip: string, username: string): number {
      const now = clock.now().getTime();
      const pair = pairOf(ip, username);
      const own = over(`p:${pair}`, limits.failuresPerIpUser, now);
      if (own > 0) return own;
      if ((known.get(pair) ?? 0) > now) return 0;
      return Math.max(
        over(`i:${ip}`, limits.failuresPerIp, now),
        over(`u:${username}`, limits.failuresPerUser, now),
      );
    },
    failed(ip: string, username: string) {
      const now = clock.now().getTime();
      bump(`p:${pairOf(ip, username)}`, now);
      bump(`i:${ip}`, now);
      bump(`u:${username}`, now);
    },
    succeeded(ip: string, username: string) {
      const pair = pairOf(ip, username);
      counters.delete(`p:${pair}`);
      known.delete(pair);
      known.set(pair, clock.now().getTime() + KNOWN_MS);
      bounded(known);
    },
  };
}

export type AttemptLimiter = ReturnType<typeof createAttemptLimiter>;
