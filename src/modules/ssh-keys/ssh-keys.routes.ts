import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { CreateSshKeyBody, SshKeyList, SshKeyParams, SshKeySchema } from './ssh-keys.schemas.js';
import type { SshKeyRow } from './ssh-keys.service.js';

const toSshKey = (row: SshKeyRow) => ({
  comment: row.comment,
  created_at: row.created_at.toISOString(),
  fingerprint: row.fingerprint,
  uuid: row.id,
});

export function sshKeysRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['SSH Key'];
    const resource = 'ssh_key';

    app.get(
      '/ssh_keys',
      {
        schema: {
          operationId: 'listSshKeys',
          tags,
          summary: "The caller's SSH keys",
          querystring: PageQuery,
          response: { 200: SshKeyList, ...errorResponses(400) },
        },
        config: { resource },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.sshKeys.list(callerOf(request), page);
        return envelope(request, config.publicUrl, page, count, rows.map(toSshKey));
      },
    );

    app.post(
      '/ssh_keys',
      {
        schema: {
          operationId: 'createSshKey',
          tags,
          summary: 'Add an SSH public key to the caller',
          body: CreateSshKeyBody,
          response: { 201: SshKeySchema, ...errorResponses(400, 403, 413, 415) },
        },
        config: { resource },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send(toSshKey(await services.sshKeys.create(callerOf(request), request.body.public_key))),
    );

    app.delete(
      '/ssh_keys/:ssh_key_id',
      {
        schema: {
          operationId: 'deleteSshKey',
          tags,
          summary: 'Delete one of the caller’s SSH keys',
          params: SshKeyParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 403, 404) },
        },
        config: { resource },
      },
      async (request, reply) => {
        await services.sshKeys.remove(callerOf(request), request.params.ssh_key_id);
        return reply.status(204).send(null);
      },
    );
  };
}
