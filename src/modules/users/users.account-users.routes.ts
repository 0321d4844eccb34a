import { type TSchema, Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { baseUrl, envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses, OrDryRun, publicErrorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { AccountParams } from '../accounts/accounts.schemas.js';
import {
  AccountUserChanged,
  AccountUserList,
  AccountUserParams,
  AccountUserSchema,
  CreateAccountUserBody,
  CreateAccountUserDryRun,
  DeleteAccountUserDryRun,
  InvitationAccepted,
  InvitationParams,
  UpdateAccountUserBody,
  UpdateAccountUserDryRun,
} from './users.account-users.schemas.js';
import type { AccountUserRow } from './users.account-users.service.js';

const SUCCESS = 'Your change was successful.';

/** A public route's errors: those of `errorResponses` but 401 (it takes no credentials). */
const withoutAuth = ({ 401: _, ...rest }: Record<number, TSchema>) => rest;

/** The AccountUser record: `last_owner` for owners only, `installs` for partial members only. */
export const toAccountUser = ({
  installs,
  last_owner,
  ...row
}: AccountUserRow & { last_owner: boolean | null }) => ({
  ...row,
  ...(last_owner !== null && { last_owner }),
  ...(row.roles.startsWith('partial') && { installs }),
});

/** U1-U4: the members of an account (owner and full roles manage them). */
export function accountUsersRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Account User'];
    const resource = 'account_user';

    app.get(
      '/accounts/:account_id/account_users',
      {
        schema: {
          operationId: 'listAccountUsers',
          tags,
          summary: 'List the users of an account',
          params: AccountParams,
          querystring: PageQuery,
          response: { 200: AccountUserList, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { account_id } = request.params;
        const { count, rows } = await services.accountUsers.list(callerOf(request), account_id, page);
        return envelope(request, config.publicUrl, page, count, rows.map(toAccountUser));
      },
    );

    app.post(
      '/accounts/:account_id/account_users',
      {
        schema: {
          operationId: 'createAccountUser',
          tags,
          summary:
            'Add a user to an account and e-mail them an invitation (`?dry_run=true`: what it would do, nothing changed)',
          params: AccountParams,
          querystring: DryRunQuery,
          body: CreateAccountUserBody,
          response: {
            200: CreateAccountUserDryRun,
            201: AccountUserChanged,
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: { resource },
      },
      async (request, reply) => {
        if (request.query.dry_run) {
          const { account_id } = request.params;
          return services.accountUsers.inviteDryRun(callerOf(request), account_id, request.body.user);
        }
        const row = await services.accountUsers.create(
          callerOf(request),
          request.params.account_id,
          request.body.user,
          baseUrl(request, config.publicUrl),
        );
        return reply.status(201).send({ message: SUCCESS, account_user: toAccountUser(row) });
      },
    );

    app.get(
      '/accounts/:account_id/account_users/:user_id',
      {
        schema: {
          operationId: 'getAccountUser',
          tags,
          summary: 'Get one user of an account',
          params: AccountUserParams,
          response: { 200: AccountUserSchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const { account_id, user_id } = request.params;
        return toAccountUser(await services.accountUsers.get(callerOf(request), account_id, user_id));
      },
    );

    app.patch(
      '/accounts/:account_id/account_users/:user_id',
      {
        schema: {
          operationId: 'updateAccountUser',
          tags,
          summary:
            "Change a user's roles and install_ids (`?dry_run=true`: what it would change, nothing changed)",
          params: AccountUserParams,
          querystring: DryRunQuery,
          body: UpdateAccountUserBody,
          response: {
            200: OrDryRun(UpdateAccountUserDryRun, {
              ...AccountUserChanged,
              description: 'The changed user',
            }),
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: { resource },
      },
      async (request) => {
        const { account_id, user_id } = request.params;
        if (request.query.dry_run) {
          return services.accountUsers.updateDryRun(callerOf(request), account_id, user_id, request.body);
        }
        const row = await services.accountUsers.update(callerOf(request), account_id, user_id, request.body);
        return { message: SUCCESS, account_user: toAccountUser(row) };
      },
    );

    app.delete(
      '/accounts/:account_id/account_users/:user_id',
      {
        schema: {
          operationId: 'deleteAccountUser',
          tags,
          summary: 'Remove a user from an account (`?dry_run=true`: what it would do, nothing changed)',
          params: AccountUserParams,
          querystring: DryRunQuery,
          response: {
            200: DeleteAccountUserDryRun,
            204: Type.Null({ description: 'Deleted' }),
            ...errorResponses(400, 403, 404),
          },
        },
        config: { resource },
      },
      async (request, reply) => {
        const { account_id, user_id } = request.params;
        if (request.query.dry_run) {
          return services.accountUsers.removeDryRun(callerOf(request), account_id, user_id);
        }
        await services.accountUsers.remove(callerOf(request), account_id, user_id);
        return reply.status(204).send(null);
      },
    );
  };
}

/** Hostplane extension, no auth: accepting an invitation (the token is the credential). */
export function invitationsRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.post(
      '/invitations/:token/accept',
      {
        schema: {
          operationId: 'acceptInvitation',
          tags: ['Account User'],
          summary: 'Accept an invitation (single use, 7 days); a new user gets its credential once',
          security: [],
          params: InvitationParams,
          response: {
            200: InvitationAccepted,
            ...withoutAuth(errorResponses(400, 404)),
            ...publicErrorResponses(),
          },
        },
        config: { resource: 'invitation' },
      },
      async (request) => {
        const accepted = await services.accountUsers.accept(request.params.token);
        return { message: 'Invitation accepted', ...accepted };
      },
    );
  };
}
