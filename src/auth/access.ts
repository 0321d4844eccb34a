import { Errors } from '../errors.js';

// A1: the five account roles, declared with the column that stores them.
export { isRole, ROLES, type Role } from '../db/schema.js';

import type { Role } from '../db/schema.js';

/** Everything a role may or may not do; checked once per route through the helpers below. */
export type Action =
  | 'account:read'
  | 'users:read'
  | 'users:manage'
  | 'sites:create'
  | 'sites:update'
  | 'sites:delete'
  | 'installs:create'
  | 'installs:update'
  | 'installs:delete'
  | 'installs:read'
  | 'installs:operate'
  // Issue 29: a single-use sign-in link to the install's wp-admin (never through a scoped credential).
  | 'installs:sign_in'
  | 'transfers:manage'
  | 'usage:account'
  | 'reports:read'
  | 'reports:manage'
  // Issue 22: scoped credentials and the audit log (owners only; never through a scoped credential).
  | 'credentials:manage'
  | 'audit:read'
  // Issue 22: webhook endpoints (owners; an admin-scoped credential of an owner too).
  | 'webhooks:manage';

const PARTIAL: Action[] = ['account:read', 'installs:read', 'installs:operate', 'installs:sign_in'];
const FULL: Action[] = [
  ...PARTIAL,
  'users:read',
  'users:manage',
  'sites:create',
  'sites:update',
  'sites:delete',
  'installs:create',
  'installs:update',
  'installs:delete',
  'usage:account',
  // Site reports cover every install of a site, so partial members (A2) neither read nor manage them.
  'reports:read',
  'reports:manage',
];

/** The role matrix (docs/conformance.md prints it); `,billing` adds billing actions (transfers) to full. */
export const ROLE_MATRIX: Record<Role, ReadonlySet<Action>> = {
  owner: new Set([...FULL, 'transfers:manage', 'credentials:manage', 'audit:read', 'webhooks:manage']),
  full: new Set(FULL),
  'full,billing': new Set([...FULL, 'transfers:manage']),
  partial: new Set(PARTIAL),
  'partial,billing': new Set(PARTIAL),
};

export interface Membership {
  readonly accountId: string;
  readonly roles: Role;
  /** A2: for partial roles, the installs the member may see; null means every install of the account. */
  readonly installIds: ReadonlySet<string> | null;
  /**
   * Issue 22: through a scoped credential, the actions its scope allows (auth/credentials.ts); the
   * member may do what both the role and this set allow. Absent: everything the role allows.
   */
  readonly limit?: ReadonlySet<Action>;
}

/** Issue 22: what a scoped credential grants (auth/credentials.ts); checked on every request. */
export interface CredentialGrant {
  readonly id: string;
  readonly accountId: string;
  readonly scope: 'read' | 'operate' | 'admin';
  readonly installIds: readonly string[] | null;
  /** Epoch milliseconds; null: never expires. */
  readonly expiresAt: number | null;
  readonly allowedCidrs: readonly string[] | null;
}

/** The authenticated caller, attached to each /v1 request by http/auth.ts. */
export interface Caller {
  readonly userId: string;
  readonly username: string;
  readonly memberships: ReadonlyMap<string, Membership>;
  /** Issue 22: set when the request authenticated with a scoped credential (`hpk_...`). */
  readonly credential?: CredentialGrant;
}

/** Whether a role (or a membership: its role and its credential's limit) allows `action`. */
export function can(who: Role | Pick<Membership, 'roles' | 'limit'>, action: Action): boolean {
  if (typeof who === 'string') return ROLE_MATRIX[who].has(action);
  return ROLE_MATRIX[who.roles].has(action) && (who.limit === undefined || who.limit.has(action));
}

/** G4: the caller's membership of an account, or 404 (a foreign account is not revealed). */
export function requireMember(caller: Caller, accountId: string): Membership {
  const membership = caller.memberships.get(accountId);
  if (!membership) throw Errors.notFound();
  return membership;
}

/** G3/G4: 404 for a foreign account, 403 when the role does not allow the action. */
export function requireAccount(caller: Caller, accountId: string, action: Action): Membership {
  const membership = requireMember(caller, accountId);
  if (!can(membership, action)) throw Errors.forbidden();
  return membership;
}

/** A2: whether a member sees an install (partial members only their install_ids). */
export function seesInstall(membership: Membership, installId: string): boolean {
  return membership.installIds === null || membership.installIds.has(installId);
}

/** G3/G4/A2: 404 when the install is invisible to the caller, 403 when the role does not allow the action. */
export function requireInstall(
  caller: Caller,
  install: { id: string; account_id: string },
  action: Action,
): Membership {
  const membership = caller.memberships.get(install.account_id);
  if (!membership || !seesInstall(membership, install.id)) throw Errors.notFound();
  if (!can(membership, action)) throw Errors.forbidden();
  return membership;
}

/** The account ids the caller belongs to (optionally only those where it may do `action`). */
export function memberAccountIds(caller: Caller, action?: Action): string[] {
  return [...caller.memberships.values()].filter((m) => !action || can(m, action)).map((m) => m.accountId);
}
