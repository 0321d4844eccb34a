import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  AccountParams,
  CreateCredentialBody,
  CreatedCredentialSchema,
  CredentialList,
  CredentialParams,
  CredentialSchema,
} from './credentials.schemas.js';
import { type CredentialRow, usernameOf } from './credentials.service.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

const toCredential = (row: CredentialRow) => ({
  id: row.id,
  account_id: row.account_id,
  user_id: row.user_id,
  username: usernameOf(row.id),
  description: row.description,
  scope: row.scope,
  install_ids: row.install_ids,
  allowed_cidrs: row.allowed_cidrs,
  expires_at: iso(row.expires_at),
  revoked_at: iso(row.revoked_at),
  last_used_at: iso(row.last_used_at),
  last_used_ip: row.last_used_ip,
  created_at: row.created_at.toISOString(),
});

/** Issue 22: scoped, expiring credentials of an account (owners only). */
export function credentialsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Credential'];
    const resource = 'credential';

    app.get(
      '/accounts/:account_id/credentials',
      {
        schema: {
          operationId: 'listCredentials',
          tags,
          summary: "The account's scoped credentials (never their secrets)",
          params: AccountParams,
          querystring: PageQuery,
          response: { 200: CredentialList, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.credentials.list(
          callerOf(request),
          request.params.account_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toCredential));
      },
    );

    app.post(
      '/accounts/:account_id/credentials',
      {
        schema: {
          operationId: 'createCredential',
          tags,
          summary: 'Make a scoped credential (HTTP Basic); the password is answered this once',
          params: AccountParams,
          body: CreateCredentialBody,
          response: { 201: CreatedCredentialSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: { resource },
      },
      async (request, reply) => {
        const made = await services.credentials.create(
          callerOf(request),
          request.params.account_id,
          request.body,
        );
        return reply.status(201).send({ ...toCredential(made), password: made.password });
      },
    );

    app.get(
      '/accounts/:account_id/credentials/:credential_id',
      {
        schema: {
          operationId: 'getCredential',
          tags,
          summary: 'One scoped credential (never its secret)',
          params: CredentialParams,
          response: { 200: CredentialSchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request) =>
        toCredential(
          await services.credentials.get(
            callerOf(request),
            request.params.account_id,
            request.params.credential_id,
          ),
        ),
    );

    app.delete(
      '/accounts/:account_id/credentials/:credential_id',
      {
        schema: {
          operationId: 'revokeCredential',
          tags,
          summary: 'Revoke a scoped credential: refused from the next request on, in every process',
          params: CredentialParams,
          response: { 204: Type.Null({ description: 'Revoked' }), ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request, reply) => {
        await services.credentials.revoke(
          callerOf(request),
          request.params.account_id,
          request.params.credential_id,
        );
        return reply.status(204).send(null);
      },
    );
  };
}
