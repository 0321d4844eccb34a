import { type Caller, isRole, ROLES } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import { generateCredential } from '../../auth/passwords.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import * as repo from './users.repo.js';

export interface MembershipInput {
  account_id: string;
  roles: string;
  install_ids?: string[];
}

export interface CreateUserInput {
  email: string;
  first_name: string;
  last_name: string;
  phone?: string | null;
  memberships?: MembershipInput[];
}

export interface UsersDeps {
  db: Db;
  accounts: Pick<AccountsService, 'find'>;
  authenticator: Pick<Authenticator, 'invalidate' | 'membershipsChanged' | 'hashPassword'>;
}

export function createUsersService({ db, accounts, authenticator }: UsersDeps) {
  /** A1/U2/U3: valid roles; install_ids only for partial roles and only installs of that account. */
  async function checkedMembership(tx: Db, input: MembershipInput, index: number) {
    const field = (name: string) => `memberships[${index}].${name}`;
    if (!isRole(input.roles)) {
      throw Errors.invalidValue('user', field('roles'), `roles must be one of ${ROLES.join(', ')}`);
    }
    if (!(await accounts.find(input.account_id, tx))) {
      throw Errors.invalidValue('user', field('account_id'), `Account ${input.account_id} does not exist`);
    }
    const installIds = [...new Set(input.install_ids ?? [])];
    const partial = input.roles.startsWith('partial');
    if (!partial && installIds.length > 0) {
      throw Errors.invalidValue('user', field('install_ids'), 'install_ids apply to partial roles only');
    }
    const found = await repo.installIdsOfAccount(tx, input.account_id, installIds);
    const missing = installIds.filter((id) => !found.includes(id));
    if (missing.length > 0) {
      throw Errors.invalidValue(
        'user',
        field('install_ids'),
        `Not installs of account ${input.account_id}: ${missing.join(', ')}`,
      );
    }
    return { accountId: input.account_id, roles: input.roles, installIds };
  }

  async function describe(tx: Db, userId: string) {
    const user = await repo.findUser(tx, userId);
    if (!user) throw Errors.notFound();
    return { ...user, memberships: await repo.listMemberships(tx, userId) };
  }

  return {
    async current(caller: Caller) {
      const user = await repo.findUser(db, caller.userId);
      if (!user) throw Errors.unauthenticated();
      return user;
    },

    async create(input: CreateUserInput) {
      try {
        const result = await withTransaction(db, async (tx) => {
          if (await repo.findUserByEmail(tx, input.email)) {
            throw Errors.valueUnavailable('user', 'email', `A user with email ${input.email} already exists`);
          }
          const user = await repo.insertUser(tx, {
            email: input.email,
            first_name: input.first_name,
            last_name: input.last_name,
            phone: input.phone ?? null,
          });
          for (const [index, m] of (input.memberships ?? []).entries()) {
            const checked = await checkedMembership(tx, m, index);
            await repo.putMembership(tx, checked.accountId, user.id, checked.roles, checked.installIds);
          }
          return describe(tx, user.id);
        });
        return result;
      } catch (err) {
        if (sqlState(err)?.code === '23505') {
          throw Errors.valueUnavailable('user', 'email', `A user with email ${input.email} already exists`);
        }
        throw err;
      }
    },

    async putMembership(userId: string, input: MembershipInput) {
      const result = await withTransaction(db, async (tx) => {
        if (!(await repo.findUser(tx, userId))) throw Errors.notFound();
        const checked = await checkedMembership(tx, input, 0);
        await repo.putMembership(tx, checked.accountId, userId, checked.roles, checked.installIds);
        await authenticator.membershipsChanged(tx);
        return describe(tx, userId);
      });
      authenticator.invalidate();
      return result;
    },

    async deleteMembership(userId: string, accountId: string) {
      await withTransaction(db, async (tx) => {
        if (!(await repo.deleteMembership(tx, accountId, userId))) throw Errors.notFound();
        await authenticator.membershipsChanged(tx);
      });
      authenticator.invalidate();
    },

    /** Operators only: `mfa_enabled` is false unless set here (Hostplane has no MFA enrolment). */
    async adminUpdate(userId: string, values: { mfa_enabled?: boolean }) {
      if (values.mfa_enabled !== undefined) await repo.setMfaEnabled(db, userId, values.mfa_enabled);
      return describe(db, userId);
    },

    /** A new API credential; the password is returned once and stored as a hash only. */
    async issueCredential(userId: string, wanted?: { username: string; password: string }) {
      if (!(await repo.findUser(db, userId))) throw Errors.notFound();
      const credential = wanted ?? generateCredential();
      try {
        await repo.insertCredential(
          db,
          userId,
          credential.username,
          await authenticator.hashPassword(credential.password),
        );
      } catch (err) {
        if (sqlState(err)?.code === '23505') {
          throw Errors.valueUnavailable('credential', 'username', `Username ${credential.username} is taken`);
        }
        throw err;
      }
      return credential;
    },

    describe: (userId: string) => describe(db, userId),
  };
}

export type UsersService = ReturnType<typeof createUsersService>;
