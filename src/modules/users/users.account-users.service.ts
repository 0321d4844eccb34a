import { type Caller, type Role, requireAccount } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { Outbox } from '../../mail/outbox.js';
import type { EventRecorder } from '../events/events.service.js';
import * as repo from './users.account-users.repo.js';
import { createInvitationsService, type NewAccountUser } from './users.invitations.service.js';
import {
  asRole,
  checkedScope,
  isPartial,
  managerRole,
  membershipChange,
  RANK,
  refuseOwnerChangeThroughCredential,
} from './users.membership.js';
import * as users from './users.repo.js';

/** updateAccountUser's body: the roles, and install_ids for a partial member. */
type RoleChange = { roles: string; install_ids?: string[] };

export type { NewAccountUser } from './users.invitations.service.js';

export interface AccountUsersDeps {
  db: Db;
  clock: Clock;
  outbox: Pick<Outbox, 'add'>;
  authenticator: Pick<Authenticator, 'membershipsChanged' | 'invalidate' | 'hashPassword'>;
  /** Issue 22: `user.invited` and `user.removed`, in the transactions of the membership changes. */
  events?: EventRecorder;
}

/**
 * The members of an account: listing, roles and removal here; adding a member and accepting its
 * invitation in users.invitations.service.ts, assembled into the one service the routes call.
 */
export function createAccountUsersService(deps: AccountUsersDeps) {
  const { db, authenticator } = deps;
  const changing = membershipChange(db, authenticator);
  const invitations = createInvitationsService(deps);

  /** The one-owner rule: the account's only owner cannot lose the role. */
  async function assertNotLastOwner(tx: Db, accountId: string, current: string) {
    if (current === 'owner' && (await repo.countOwners(tx, accountId)) <= 1) {
      throw Errors.invalidValue(
        'account_user',
        'roles',
        'An account keeps at least one owner: make another member owner first',
        'last_owner',
      );
    }
  }

  /** In the change's transaction (the account locked): the caller may manage the member's role. */
  async function lockedMember(tx: Db, caller: Caller, accountId: string, userId: string) {
    if (!(await repo.lockAccount(tx, accountId))) throw Errors.notFound();
    const own = await managerRole(tx, caller, accountId);
    const current = await repo.roleOf(tx, accountId, userId);
    if (!current) throw Errors.notFound();
    if (RANK[current] > RANK[own]) throw Errors.forbidden();
    return { own, current };
  }

  /** No escalation, the scope, the last owner keeps the role; the scope to store. Nothing written. */
  async function checkUpdate(
    tx: Db,
    caller: Caller,
    accountId: string,
    userId: string,
    roles: Role,
    input: RoleChange,
  ) {
    const { own, current } = await lockedMember(tx, caller, accountId, userId);
    if (RANK[roles] > RANK[own]) throw Errors.forbidden();
    refuseOwnerChangeThroughCredential(caller, roles === 'owner' || current === 'owner');
    // install_ids omitted: a partial member keeps its scope; any other gets none.
    const wanted =
      input.install_ids ??
      (isPartial(roles) && isPartial(current) ? await repo.scopeOf(tx, accountId, userId) : []);
    const scope = await checkedScope(tx, accountId, roles, wanted, 'install_ids');
    if (roles !== 'owner') await assertNotLastOwner(tx, accountId, current);
    return { current, scope };
  }

  /** The member may be removed by the caller, and is not the last owner. Nothing written. */
  async function checkRemove(tx: Db, caller: Caller, accountId: string, userId: string) {
    const { current } = await lockedMember(tx, caller, accountId, userId);
    refuseOwnerChangeThroughCredential(caller, current === 'owner');
    await assertNotLastOwner(tx, accountId, current);
    return current;
  }

  async function withLastOwner(db: Db, accountId: string, row: repo.AccountUserRow) {
    const owners = row.roles === 'owner' ? await repo.countOwners(db, accountId) : 0;
    return { ...row, last_owner: row.roles === 'owner' ? owners === 1 : null };
  }

  async function get(caller: Caller, accountId: string, userId: string) {
    requireAccount(caller, accountId, 'users:read');
    const row = await repo.findAccountUser(db, accountId, userId);
    if (!row) throw Errors.notFound();
    return withLastOwner(db, accountId, row);
  }

  return {
    async list(caller: Caller, accountId: string, page: Page) {
      requireAccount(caller, accountId, 'users:read');
      const { count, rows } = await repo.listAccountUsers(db, accountId, page);
      const owners = await repo.countOwners(db, accountId);
      return {
        count,
        rows: rows.map((r) => ({ ...r, last_owner: r.roles === 'owner' ? owners === 1 : null })),
      };
    },

    get,

    /** U1-U4: adds a member (users.invitations.service.ts) and returns it as getAccountUser does. */
    async create(caller: Caller, accountId: string, input: NewAccountUser, acceptBase: string) {
      const userId = await invitations.invite(caller, accountId, input, acceptBase);
      return get(caller, accountId, userId);
    },

    /** Changes roles and install_ids; no escalation, and the last owner keeps the role. */
    async update(caller: Caller, accountId: string, userId: string, input: RoleChange) {
      const roles = asRole(input.roles, 'roles');
      requireAccount(caller, accountId, 'users:manage');
      await changing(async (tx) => {
        const { scope } = await checkUpdate(tx, caller, accountId, userId, roles, input);
        await users.putMembership(tx, accountId, userId, roles, scope);
      });
      return get(caller, accountId, userId);
    },

    /** Issue 22, `?dry_run=true`: the checks of `update` (in a transaction that writes nothing) and the change. */
    async updateDryRun(caller: Caller, accountId: string, userId: string, input: RoleChange) {
      const roles = asRole(input.roles, 'roles');
      requireAccount(caller, accountId, 'users:manage');
      return withTransaction(db, async (tx) => {
        const { current, scope } = await checkUpdate(tx, caller, accountId, userId, roles, input);
        return {
          dry_run: true as const,
          account_id: accountId,
          user_id: userId,
          roles: { before: current, after: roles },
          install_ids: { before: await repo.scopeOf(tx, accountId, userId), after: scope },
        };
      });
    },

    /** Removes the membership (the user and its other memberships stay); never the last owner. */
    async remove(caller: Caller, accountId: string, userId: string) {
      requireAccount(caller, accountId, 'users:manage');
      await changing(async (tx) => {
        const current = await checkRemove(tx, caller, accountId, userId);
        await users.deleteMembership(tx, accountId, userId);
        await deps.events?.record(tx, {
          account_id: accountId,
          install_id: null,
          type: 'user.removed',
          resource: { type: 'account_user', id: userId },
          data: { user_id: userId, roles: current, removed_by: caller.userId },
        });
      });
    },

    /** Issue 22, `?dry_run=true`: the checks of `remove` (in a transaction that writes nothing) and what would end. */
    async removeDryRun(caller: Caller, accountId: string, userId: string) {
      requireAccount(caller, accountId, 'users:manage');
      return withTransaction(db, async (tx) => {
        const current = await checkRemove(tx, caller, accountId, userId);
        return {
          dry_run: true as const,
          account_id: accountId,
          user_id: userId,
          roles: current,
          install_ids: await repo.scopeOf(tx, accountId, userId),
        };
      });
    },

    inviteDryRun: invitations.inviteDryRun,
    accept: invitations.accept,
  };
}

export type AccountUsersService = ReturnType<typeof createAccountUsersService>;
export type { AccountUserRow } from './users.account-users.repo.js';
