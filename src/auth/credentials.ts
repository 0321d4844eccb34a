import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import type { Action, Caller, CredentialGrant, Membership } from './access.js';
import { touchScopedCredentials } from './auth.repo.js';

/**
 * Issue 22: scoped, expiring credentials that still speak HTTP Basic (docs/decisions.md #107-#109).
 *
 * The username is `hpk_` and the credential's id (32 hex digits), the password 32 random bytes
 * (base64url). The secret is stored as its SHA-256: it carries 256 bits of entropy, so a slow hash
 * (scrypt, as for chosen passwords) would only cost CPU on every uncached request without making a
 * stolen table any easier to use; and unkeyed, so rotating the service's secret key does not void it.
 *
 * The caller of a scoped credential is the maker's caller narrowed (`narrow`): one account, the
 * maker's membership there (as loaded now: a role change or removal bumps the membership epoch and
 * reloads it), install ids intersected, and actions limited to the scope. Expiry and the IP
 * allow-list are checked on every request, cached or not, in memory (`createCredentialGate`).
 */

export type Scope = CredentialGrant['scope'];
export const SCOPES: readonly Scope[] = ['read', 'operate', 'admin'];

const READ: Action[] = ['account:read', 'users:read', 'installs:read', 'usage:account', 'reports:read'];
/** `operate` = read plus the install operations (backups, restores, copies, purges, domains, SSL). */
const OPERATE: Action[] = [...READ, 'installs:operate'];
const ADMIN: Action[] = [
  ...OPERATE,
  'users:manage',
  'sites:create',
  'sites:update',
  'sites:delete',
  'installs:create',
  'installs:update',
  'installs:delete',
  'transfers:manage',
  'reports:manage',
  'audit:read',
  'webhooks:manage',
  // Never 'credentials:manage': a leaked credential cannot mint others (decisions.md #108).
];
/** A credential limited to some installs acts on those installs only, never on the account's sites. */
const INSTALL_SCOPED: ReadonlySet<Action> = new Set(['account:read', 'installs:read', 'installs:operate']);

export const SCOPE_ACTIONS: Record<Scope, ReadonlySet<Action>> = {
  read: new Set(READ),
  operate: new Set(OPERATE),
  admin: new Set(ADMIN),
};

const USERNAME = /^hpk_([0-9a-f]{32})$/;

export function isScopedUsername(username: string): boolean {
  return USERNAME.test(username);
}

/** The credential id (a UUID) of an `hpk_` username, or null. */
export function credentialIdOf(username: string): string | null {
  const hex = USERNAME.exec(username)?.[1];
  if (!hex) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const usernameOf = (id: string) => `hpk_${id.replaceAll('-', '')}`;

export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function hashSecret(secret: string): string {
  return `sha256:${createHash('sha256').update(secret).digest('hex')}`;
}

/** Constant-time comparison of the secret's hash with the stored one. */
export function verifySecret(secret: string, stored: string): boolean {
  const given = Buffer.from(hashSecret(secret));
  const want = Buffer.from(stored);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** A CIDR (`10.0.0.0/8`, `2001:db8::/32`) or a single address; null when malformed. */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', prefixText, extra] = text.split('/');
  if (extra !== undefined) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) return null;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

function blockListOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const parsed = parseCidr(cidr);
    if (parsed) list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return list;
}

/** The maker's caller narrowed to what the credential grants (the intersection). */
export function narrow(caller: Caller, grant: CredentialGrant): Caller {
  const memberships = new Map<string, Membership>();
  const membership = caller.memberships.get(grant.accountId);
  if (membership) {
    let installIds = membership.installIds;
    if (grant.installIds) {
      const wanted = grant.installIds;
      installIds = new Set(
        wanted.filter((id) => membership.installIds === null || membership.installIds.has(id)),
      );
    }
    const scoped = SCOPE_ACTIONS[grant.scope];
    const limit = new Set(
      [...scoped].filter(
        (a) => (grant.installIds ? INSTALL_SCOPED.has(a) : true) && (membership.limit?.has(a) ?? true),
      ),
    );
    memberships.set(grant.accountId, {
      accountId: grant.accountId,
      roles: membership.roles,
      installIds,
      limit,
    });
  }
  return { userId: caller.userId, username: caller.username, memberships, credential: grant };
}

/** What GET /metrics reports of scoped credentials. */
export interface CredentialGateStats {
  /** Requests with a scoped credential refused after its secret matched (expired or IP refused). */
  refusedExpired: number;
  refusedAddress: number;
  /** last_used writes made (write-behind batches) and failed. */
  usageFlushes: number;
  usageFlushFailures: number;
}

/** How often pending last-used stamps are written at most (write-behind). */
const FLUSH_MS = 10_000;

/**
 * Per process: admits a scoped credential's request (expiry, IP allow-list; no query) and keeps its
 * last use in memory, written at most every 10 s in one statement, never on the request's path.
 */
export function createCredentialGate({ db, clock }: { db: Db; clock: Clock }) {
  const lists = new Map<string, BlockList>();
  const pending = new Map<string, { at: Date; ip: string | null }>();
  const stats: CredentialGateStats = {
    refusedExpired: 0,
    refusedAddress: 0,
    usageFlushes: 0,
    usageFlushFailures: 0,
  };
  let flushedAt = clock.now().getTime();
  let flushing: Promise<void> | null = null;

  function allowedFrom(grant: CredentialGrant, ip: string | undefined): boolean {
    if (!grant.allowedCidrs) return true;
    if (!ip) return false;
    const key = grant.allowedCidrs.join(',');
    let list = lists.get(key);
    if (!list) {
      if (lists.size > 10_000) lists.clear();
      list = blockListOf(grant.allowedCidrs);
      lists.set(key, list);
    }
    const plain = ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
    return list.check(plain, isIP(plain) === 6 ? 'ipv6' : 'ipv4');
  }

  async function flush(): Promise<void> {
    if (flushing) return flushing;
    if (pending.size === 0) return;
    const batch = [...pending.entries()].map(([id, use]) => ({ id, at: use.at, ip: use.ip }));
    pending.clear();
    flushedAt = clock.now().getTime();
    flushing = (async () => {
      try {
        await touchScopedCredentials(db, batch);
        stats.usageFlushes++;
      } catch {
        stats.usageFlushFailures++;
      } finally {
        flushing = null;
      }
    })();
    return flushing;
  }

  return {
    /** Whether the request of `caller` (with a scoped credential) may go on; records its use. */
    admit(caller: Caller, ip: string | undefined): boolean {
      const grant = caller.credential;
      if (!grant) return true;
      const now = clock.now();
      if (grant.expiresAt !== null && grant.expiresAt <= now.getTime()) {
        stats.refusedExpired++;
        return false;
      }
      if (!allowedFrom(grant, ip)) {
        stats.refusedAddress++;
        return false;
      }
      pending.set(grant.id, { at: now, ip: ip ?? null });
      if (now.getTime() - flushedAt >= FLUSH_MS) void flush();
      return true;
    },
    /** Writes the pending last-used stamps now (before a read of them, and at shutdown). */
    flush,
    stats: (): CredentialGateStats => ({ ...stats }),
  };
}

export type CredentialGate = ReturnType<typeof createCredentialGate>;
