import { createHash, randomBytes } from 'node:crypto';
import type { Caller } from '../../auth/access.js';
import { requireAccount } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import { generateCredential } from '../../auth/passwords.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { Outbox } from '../../mail/outbox.js';
import { invitationMail } from '../../mail/templates/invitation.js';
import type { EventRecorder } from '../events/events.service.js';
import * as repo from './users.account-users.repo.js';
import {
  asRole,
  checkedScope,
  managerRole,
  membershipChange,
  RANK,
  refuseOwnerChangeThroughCredential,
} from './users.membership.js';
import * as users from './users.repo.js';

/** An invitation link works for 7 days. */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export interface NewAccountUser {
  account_id: string;
  first_name: string;
  last_name: string;
  email: string;
  roles: string;
  install_ids?: string[];
}

export interface InvitationsDeps {
  db: Db;
  clock: Clock;
  outbox: Pick<Outbox, 'add'>;
  authenticator: Pick<Authenticator, 'membershipsChanged' | 'invalidate' | 'hashPassword'>;
  /** Issue 22: `user.invited` and `user.removed`, in the transactions of the membership changes. */
  events?: EventRecorder;
}

/** Adding a member (createAccountUser, U1-U4) and accepting its invitation (acceptInvitation). */
export function createInvitationsService({ db, clock, outbox, authenticator, events }: InvitationsDeps) {
  const changing = membershipChange(db, authenticator);

  /** U1: what can be decided from the caller and the body alone. */
  function checkRequest(caller: Caller, accountId: string, input: NewAccountUser) {
    requireAccount(caller, accountId, 'users:manage');
    if (input.account_id !== accountId) {
      throw Errors.invalidValue(
        'account_user',
        'user.account_id',
        `user.account_id must be the account of the path (${accountId})`,
      );
    }
  }

  /**
   * U2-U4 in the transaction (the account locked): no escalation, the scope, not a member already.
   * The user the e-mail names, if it exists. Nothing written.
   */
  async function check(tx: Db, caller: Caller, accountId: string, input: NewAccountUser) {
    const account = await repo.lockAccount(tx, accountId);
    if (!account) throw Errors.notFound();
    const own = await managerRole(tx, caller, accountId);
    const roles = asRole(input.roles, 'user.roles');
    if (RANK[roles] > RANK[own]) throw Errors.forbidden();
    refuseOwnerChangeThroughCredential(caller, roles === 'owner');
    const scope = await checkedScope(tx, accountId, roles, input.install_ids ?? [], 'user.install_ids');
    const existing = await users.findUserByEmail(tx, input.email);
    if (existing && (await repo.roleOf(tx, accountId, existing.id))) {
      throw Errors.valueUnavailable(
        'account_user',
        'user.email',
        `${input.email} is already a user of this account`,
        'already_member',
      );
    }
    return { account, roles, scope, existing };
  }

  return {
    /**
     * Issue 22, `?dry_run=true`: the checks of `invite` (in a transaction that writes nothing) and
     * what it would do: the membership, whether a user would be made, who would be mailed.
     */
    async inviteDryRun(caller: Caller, accountId: string, input: NewAccountUser) {
      checkRequest(caller, accountId, input);
      const { roles, scope, existing } = await withTransaction(db, (tx) =>
        check(tx, caller, accountId, input),
      );
      return {
        dry_run: true as const,
        account_id: accountId,
        email: existing?.email ?? input.email,
        roles,
        install_ids: scope,
        new_user: existing === null,
        invitation_mailed_to: existing?.email ?? input.email,
      };
    },

    /**
     * U1-U4: adds a member and returns its user id. A new e-mail becomes a user with an invitation (a
     * single-use link, valid 7 days, mailed through the outbox); a user known from another account
     * joins at once and is told by the same mail, keeping its credential. `acceptBase` is the absolute
     * base of the link.
     */
    async invite(caller: Caller, accountId: string, input: NewAccountUser, acceptBase: string) {
      checkRequest(caller, accountId, input);
      const token = randomBytes(32).toString('base64url');
      const now = clock.now();
      const expiresAt = new Date(now.getTime() + INVITATION_TTL_MS);
      try {
        return await changing(async (tx) => {
          const { account, roles, scope, existing } = await check(tx, caller, accountId, input);
          const user =
            existing ??
            (await users.insertUser(tx, {
              email: input.email,
              first_name: input.first_name,
              last_name: input.last_name,
              created_at: now,
            }));
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
          await events?.record(tx, {
            account_id: accountId,
            install_id: null,
            type: 'user.invited',
            resource: { type: 'account_user', id: user.id },
            data: {
              user_id: user.id,
              email: user.email,
              roles,
              install_ids: scope,
              invited_by: caller.userId,
              expires_at: expiresAt.toISOString(),
            },
          });
          return user.id;
        });
      } catch (err) {
        // Two concurrent invitations of one new e-mail: the second insert of the user fails.
        if (sqlState(err)?.code === '23505') {
          throw Errors.valueUnavailable('account_user', 'user.email', `${input.email} was just added; retry`);
        }
        throw err;
      }
    },

    /**
     * POST /v1/invitations/{token}/accept (no auth). Single use, 7 days. A user without a credential
     * gets one, shown once; a user who already has one keeps it.
     */
    async accept(token: string) {
      // The hash runs before the transaction (no heavy crypto inside one); unused for existing users.
      const credential = generateCredential();
      const passwordHash = await authenticator.hashPassword(credential.password);
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

export type InvitationsService = ReturnType<typeof createInvitationsService>;
