import { createHash, randomBytes } from 'node:crypto';
import { type Caller, can, isRole, ROLES, type Role, requireAccount } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import { generateCredential, hashPassword } from '../../auth/passwords.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { Outbox } from '../../mail/outbox.js';
import { invitationMail } from '../../mail/templates/invitation.js';
import * as repo from './users.account-users.repo.js';
import * as users from './users.repo.js';

/** An invitation link works for 7 days. */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

/**
 * No escalation: a member may grant, and may change or remove members holding, only roles up to its
 * own, in this order (a `,billing` role ranks above its plain form).
 */
const RANK: Record<Role, number> = { partial: 0, 'partial,billing': 1, full: 2, 'full,billing': 3, owner: 4 };
const isPartial = (roles: string) => roles.startsWith('partial');

/** U2 (the schema's enum checks it first; this narrows the type). */
function asRole(roles: string, field: string): Role {
  if (!isRole(roles)) {
    throw Errors.invalidValue('account_user', field, `roles must be one of ${ROLES.join(', ')}`);
  }
  return roles;
}
const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export interface NewAccountUser {
  account_id: string;
  first_name: string;
  last_name: string;
  email: string;
  roles: string;
  install_ids?: string[];
}

export interface AccountUsersDeps {
  db: Db;
  clock: Clock;
  outbox: Pick<Outbox, 'add'>;
  authenticator: Pick<Authenticator, 'membershipsChanged' | 'invalidate'>;
}

export function createAccountUsersService({ db, clock, outbox, authenticator }: AccountUsersDeps) {
  /** Inside the transaction: the caller's current role (not a cached one) must allow managing users. */
  async function managerRole(tx: Db, caller: Caller, accountId: string): Promise<Role> {
    const roles = await repo.roleOf(tx, accountId, caller.userId);
    if (!roles) throw Errors.notFound();
    if (!can(roles, 'users:manage')) throw Errors.forbidden();
    return roles;
  }

  /** U2/U3/A2: install_ids only with partial roles, and only installs of the account. */
  async function checkedScope(tx: Db, accountId: string, roles: string, ids: string[], field: string) {
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

  async function withLastOwner(db: Db, accountId: string, row: repo.AccountUserRow) {
    const owners = row.roles === 'owner' ? await repo.countOwners(db, accountId) : 0;
    return { ...row, last_owner: row.roles === 'owner' ? owners === 1 : null };
  }

  /** Commits a membership change: every process's credential cache drops it (decisions.md #7). */
  async function changing<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    const result = await withTransaction(db, async (tx) => {
      const out = await fn(tx);
      await authenticator.membershipsChanged(tx);
      return out;
    });
    authenticator.invalidate();
    return result;
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

    /**
     * U1-U4: adds a member. A new e-mail becomes a user with an invitation (a single-use link, valid 7
     * days, mailed through the outbox); a user known from another account joins at once and is told
     * by the same mail, keeping its credential. `acceptBase` is the absolute base of the link.
     */
    async create(caller: Caller, accountId: string, input: NewAccountUser, acceptBase: string) {
      requireAccount(caller, accountId, 'users:manage');
      if (input.account_id !== accountId) {
        throw Errors.invalidValue(
          'account_user',
          'user.account_id',
          `user.account_id must be the account of the path (${accountId})`,
        );
      }
      const token = randomBytes(32).toString('base64url');
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + INVITATION_TTL_MS);
      try {
        const userId = await changing(async (tx) => {
          const account = await repo.lockAccount(tx, accountId);
          if (!account) throw Errors.notFound();
          const own = await managerRole(tx, caller, accountId);
          const roles = asRole(input.roles, 'user.roles');
          if (RANK[roles] > RANK[own]) throw Errors.forbidden();
          const scope = await checkedScope(tx, accountId, roles, input.install_ids ?? [], 'user.install_ids');
          let user = await users.findUserByEmail(tx, input.email);
          if (user && (await repo.roleOf(tx, accountId, user.id))) {
            throw Errors.valueUnavailable(
              'account_user',
              'user.email',
              `${input.email} is already a user of this account`,
              'already_member',
            );
          }
          user ??= await users.insertUser(tx, {
            email: input.email,
            first_name: input.first_name,
            last_name: input.last_name,
            created_at: now,
          });
          await users.putMembership(tx, accountId, user.id, roles, scope);
          await repo.insertInvitation(tx, {
            account_id: accountId,
            user_id: user.id,
            token_hash: hashToken(token),
            invited_by: caller.userId,
            expires_at: expiresAt,
            created_at: now,
          });
          const inviter = await users.findUser(tx, caller.userId);
          const mail = invitationMail({
            account,
            invitee: { email: user.email, first_name: user.first_name },
            inviter: inviter ? `${inviter.first_name} ${inviter.last_name} <${inviter.email}>` : null,
            roles: input.roles,
            acceptUrl: `${acceptBase}/v1/invitations/${token}/accept`,
            expiresAt,
            existingUser: await repo.hasCredential(tx, user.id),
          });
          await outbox.add(tx, [
            { operation_id: null, event: 'account_user.invited', to: user.email, sensitive: true, ...mail },
          ]);
          return user.id;
        });
        return get(caller, accountId, userId);
      } catch (err) {
        // Two concurrent invitations of one new e-mail: the second insert of the user fails.
        if (sqlState(err)?.code === '23505') {
          throw Errors.valueUnavailable('account_user', 'user.email', `${input.email} was just added; retry`);
        }
        throw err;
      }
    },

    /** Changes roles and install_ids; no escalation, and the last owner keeps the role. */
    async update(
      caller: Caller,
      accountId: string,
      userId: string,
      input: { roles: string; install_ids?: string[] },
    ) {
      const roles = asRole(input.roles, 'roles');
      requireAccount(caller, accountId, 'users:manage');
      await changing(async (tx) => {
        if (!(await repo.lockAccount(tx, accountId))) throw Errors.notFound();
        const own = await managerRole(tx, caller, accountId);
        const current = await repo.roleOf(tx, accountId, userId);
        if (!current) throw Errors.notFound();
        if (RANK[current] > RANK[own] || RANK[roles] > RANK[own]) throw Errors.forbidden();
        // install_ids omitted: a partial member keeps its scope; any other gets none.
        const wanted =
          input.install_ids ??
          (isPartial(roles) && isPartial(current) ? await repo.scopeOf(tx, accountId, userId) : []);
        const scope = await checkedScope(tx, accountId, roles, wanted, 'install_ids');
        if (roles !== 'owner') await assertNotLastOwner(tx, accountId, current);
        await users.putMembership(tx, accountId, userId, roles, scope);
      });
      return get(caller, accountId, userId);
    },

    /** Removes the membership (the user and its other memberships stay); never the last owner. */
    async remove(caller: Caller, accountId: string, userId: string) {
      requireAccount(caller, accountId, 'users:manage');
      await changing(async (tx) => {
        if (!(await repo.lockAccount(tx, accountId))) throw Errors.notFound();
        const own = await managerRole(tx, caller, accountId);
        const current = await repo.roleOf(tx, accountId, userId);
        if (!current) throw Errors.notFound();
        if (RANK[current] > RANK[own]) throw Errors.forbidden();
        await assertNotLastOwner(tx, accountId, current);
        await users.deleteMembership(tx, accountId, userId);
      });
    },

    /**
     * POST /v1/invitations/{token}/accept (no auth). Single use, 7 days. A user without a credential
     * gets one, shown once; a user who already has one keeps it.
     */
    async accept(token: string) {
      // The hash runs before the transaction (no heavy crypto inside one); unused for existing users.
      const credential = generateCredential();
      const passwordHash = await hashPassword(credential.password);
      return withTransaction(db, async (tx) => {
        const invitation = await repo.lockInvitation(tx, hashToken(token));
        if (!invitation) throw Errors.notFound();
        if (invitation.accepted_at) {
          throw Errors.invalidValue(
            'invitation',
            'token',
            'This invitation has already been used',
            'invitation_used',
          );
        }
        if (invitation.expires_at.getTime() <= clock.now().getTime()) {
          throw Errors.invalidValue(
            'invitation',
            'token',
            'This invitation has expired',
            'invitation_expired',
          );
        }
        await repo.markAccepted(tx, invitation.account_id, invitation.user_id, clock.now());
        const isNew = !(await repo.hasCredential(tx, invitation.user_id));
        if (isNew) await users.insertCredential(tx, invitation.user_id, credential.username, passwordHash);
        return {
          account_id: invitation.account_id,
          user_id: invitation.user_id,
          credential: isNew ? credential : null,
        };
      });
    },
  };
}

export type AccountUsersService = ReturnType<typeof createAccountUsersService>;
export type { AccountUserRow } from './users.account-users.repo.js';
