import { type Caller, can, isRole, ROLES, type Role } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import * as repo from './users.account-users.repo.js';
import * as users from './users.repo.js';

/**
 * The membership rules both the account-users service (roles, removal) and the invitations service
 * (adding a member) apply.
 *
 * No escalation: a member may grant, and may change or remove members holding, only roles up to its
 * own, in this order (a `,billing` role ranks above its plain form).
 */
export const RANK: Record<Role, number> = {
  partial: 0,
  'partial,billing': 1,
  full: 2,
  'full,billing': 3,
  owner: 4,
};
export const isPartial = (roles: string) => roles.startsWith('partial');

/** U2 (the schema's enum checks it first; this narrows the type). */
export function asRole(roles: string, field: string): Role {
  if (!isRole(roles)) {
    throw Errors.invalidValue('account_user', field, `roles must be one of ${ROLES.join(', ')}`);
  }
  return roles;
}

/** Inside the transaction: the caller's current role (not a cached one) must allow managing users. */
export async function managerRole(tx: Db, caller: Caller, accountId: string): Promise<Role> {
  const roles = await repo.roleOf(tx, accountId, caller.userId);
  if (!roles) throw Errors.notFound();
  if (!can(roles, 'users:manage')) throw Errors.forbidden();
  // Issue 22: through a scoped credential, its scope must allow it too.
  const limit = caller.memberships.get(accountId)?.limit;
  if (limit && !limit.has('users:manage')) throw Errors.forbidden();
  return roles;
}

/**
 * Issue 28 finding 6 (decision 108): through a scoped credential no one is made or unmade owner
 * (invited or added as owner, promoted to or demoted from owner, an owner removed, and their dry
 * runs): a leaked `admin` credential cannot take the account. The person's own credential can.
 */
export function refuseOwnerChangeThroughCredential(caller: Caller, touchesOwner: boolean) {
  if (!touchesOwner || !caller.credential) return;
  throw Errors.forbiddenWith(
    "You don't have permission to perform this action: a scoped credential cannot make or unmake an owner " +
      '(invite, promote, demote or remove one); use your own credential',
  );
}

/** U2/U3/A2: install_ids only with partial roles, and only installs of the account. */
export async function checkedScope(tx: Db, accountId: string, roles: string, ids: string[], field: string) {
  const unique = [...new Set(ids)];
  if (!isPartial(roles) && unique.length > 0) {
    throw Errors.invalidValue(
      'account_user',
      field,
      'install_ids apply to partial roles only',
      'not_partial',
    );
  }
  const found = await users.installIdsOfAccount(tx, accountId, unique);
  const missing = unique.filter((id) => !found.includes(id));
  if (missing.length > 0) {
    throw Errors.invalidValue(
      'account_user',
      field,
      `Not installs of account ${accountId}: ${missing.join(', ')}`,
      'install_not_in_account',
    );
  }
  return unique;
}

export type MembershipChange = <T>(fn: (tx: Db) => Promise<T>) => Promise<T>;

/** Commits a membership change: every process's credential cache drops it (decisions.md #7). */
export function membershipChange(
  db: Db,
  authenticator: Pick<Authenticator, 'membershipsChanged' | 'invalidate' | 'hashPassword'>,
): MembershipChange {
  return async (fn) => {
    const result = await withTransaction(db, async (tx) => {
      const out = await fn(tx);
      await authenticator.membershipsChanged(tx);
      return out;
    });
    authenticator.invalidate();
    return result;
  };
}
