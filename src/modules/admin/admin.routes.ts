import { Type } from 'typebox';
import { errorResponses, Uuid } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import type { AccountRow } from '../accounts/accounts.service.js';
import { toInstallDetail } from '../installs/installs.routes.js';
import { InstallDetailSchema } from '../installs/installs.schemas.js';
import {
  AdminAccountBody,
  AdminAccountSchema,
  AdminInstallBody,
  AdminSiteBody,
  AdminUserBody,
  AdminUserPatch,
  AdminUserSchema,
  CredentialSchema,
  MembershipBody,
} from './admin.schemas.js';

const toAccount = (row: AccountRow) => ({ ...row, created_at: row.created_at.toISOString() });
const toUser = (user: Awaited<ReturnType<RouteContext['services']['users']['describe']>>) => ({
  id: user.id,
  email: user.email,
  first_name: user.first_name,
  last_name: user.last_name,
  phone: user.phone,
  mfa_enabled: user.mfa_enabled,
  created_at: user.created_at.toISOString(),
  memberships: user.memberships,
});

/** The operators' surface under /admin/v1 (design.md, "Administration"); Bearer-token auth. */
export function adminRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Admin'];
    const security = [{ adminToken: [] }];

    app.post(
      '/accounts',
      {
        schema: {
          operationId: 'adminCreateAccount',
          tags,
          security,
          body: AdminAccountBody,
          response: { 201: AdminAccountSchema, ...errorResponses(400, 413, 415) },
        },
        config: { resource: 'account' },
      },
      async (request, reply) =>
        reply.status(201).send(toAccount(await services.accounts.create(request.body))),
    );

    app.post(
      '/users',
      {
        schema: {
          operationId: 'adminCreateUser',
          tags,
          security,
          body: AdminUserBody,
          response: { 201: AdminUserSchema, ...errorResponses(400, 413, 415) },
        },
        config: { resource: 'user' },
      },
      async (request, reply) => reply.status(201).send(toUser(await services.users.create(request.body))),
    );

    app.get(
      '/users/:user_id',
      {
        schema: {
          operationId: 'adminGetUser',
          tags,
          security,
          params: Type.Object({ user_id: Uuid() }),
          response: { 200: AdminUserSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'user' },
      },
      async (request) => toUser(await services.users.describe(request.params.user_id)),
    );

    app.patch(
      '/users/:user_id',
      {
        schema: {
          operationId: 'adminUpdateUser',
          tags,
          security,
          params: Type.Object({ user_id: Uuid() }),
          body: AdminUserPatch,
          response: { 200: AdminUserSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'user' },
      },
      async (request) => toUser(await services.users.adminUpdate(request.params.user_id, request.body)),
    );

    app.put(
      '/users/:user_id/memberships/:account_id',
      {
        schema: {
          operationId: 'adminPutMembership',
          tags,
          security,
          params: Type.Object({ user_id: Uuid(), account_id: Uuid() }),
          body: Type.Omit(MembershipBody, ['account_id']),
          response: { 200: AdminUserSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'membership' },
      },
      async (request) =>
        toUser(
          await services.users.putMembership(request.params.user_id, {
            ...request.body,
            account_id: request.params.account_id,
          }),
        ),
    );

    app.delete(
      '/users/:user_id/memberships/:account_id',
      {
        schema: {
          operationId: 'adminDeleteMembership',
          tags,
          security,
          params: Type.Object({ user_id: Uuid(), account_id: Uuid() }),
          response: { 204: Type.Null({ description: 'Removed' }), ...errorResponses(400, 404) },
        },
        config: { resource: 'membership' },
      },
      async (request, reply) => {
        await services.users.deleteMembership(request.params.user_id, request.params.account_id);
        return reply.status(204).send(null);
      },
    );

    app.post(
      '/users/:user_id/credentials',
      {
        schema: {
          operationId: 'adminCreateCredential',
          tags,
          security,
          params: Type.Object({ user_id: Uuid() }),
          response: { 201: CredentialSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'credential' },
      },
      async (request, reply) =>
        reply.status(201).send(await services.users.issueCredential(request.params.user_id)),
    );

    app.patch(
      '/sites/:site_id',
      {
        schema: {
          operationId: 'adminUpdateSite',
          tags,
          security,
          params: Type.Object({ site_id: Uuid() }),
          body: AdminSiteBody,
          response: {
            200: Type.Object({ id: Uuid(), sandbox: Type.Boolean(), transferable: Type.Boolean() }),
            ...errorResponses(400, 404, 413, 415),
          },
        },
        config: { resource: 'site' },
      },
      async (request) => services.sites.adminUpdate(request.params.site_id, request.body),
    );

    app.patch(
      '/installs/:install_id',
      {
        schema: {
          operationId: 'adminUpdateInstall',
          tags,
          security,
          params: Type.Object({ install_id: Uuid() }),
          body: AdminInstallBody,
          response: { 200: InstallDetailSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'install' },
      },
      async (request) =>
        toInstallDetail(
          await services.installs.adminUpdate(request.params.install_id, request.body),
          config.installDomain,
        ),
    );
  };
}
