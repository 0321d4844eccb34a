import { Type } from 'typebox';
import { envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  CreatedServerSchema,
  CreateServerBody,
  EnrolmentSchema,
  PatchServerBody,
  PlacementList,
  ServerList,
  ServerParams,
  ServerSchema,
} from './servers.schemas.js';
import type { ServerRow, ServerStatus } from './servers.service.js';

type Drain = { drain_id: string; moved: number; moving: number; failed: number } | null;

/** A server as the admin API shows it. */
export const toServer = (row: ServerRow, status: ServerStatus, drain: Drain) => ({
  id: row.id,
  name: row.name,
  labels: row.labels,
  ipv4: row.ipv4,
  ipv6: row.ipv6,
  capacity: { installs: row.capacity_installs },
  state: row.state,
  status,
  installs: row.installs,
  enrolled: row.enrolled,
  last_heartbeat_at: row.last_heartbeat_at?.toISOString() ?? null,
  agent_version: row.agent_version,
  reported: (row.reported ?? null) as never,
  drain,
  created_at: row.created_at.toISOString(),
});

/** Issue 30: hosting servers (admin token): create, list, get, patch, delete, enrolment, revocation. */
export function serversRoutes({ config, services }: RouteContext): RoutesPlugin {
  const { servers, moves } = services;
  const show = async (row: ServerRow) =>
    toServer(row, servers.statusOf(row), await moves.drainProgress(row.id));
  return async (app) => {
    const tags = ['Admin: servers'];
    const security = [{ adminToken: [] }];
    const config_ = { resource: 'server' };

    app.post(
      '/servers',
      {
        schema: {
          operationId: 'adminCreateServer',
          tags,
          security,
          summary: 'Add a hosting server; answers its one-time enrolment token (shown once)',
          body: CreateServerBody,
          response: { 201: CreatedServerSchema, ...errorResponses(400, 413, 415) },
        },
        config: config_,
      },
      async (request, reply) => {
        const { server, enrolment } = await servers.create(request.body);
        return reply.status(201).send({
          server: await show(server),
          enrolment: { token: enrolment.token, expires_at: enrolment.expires_at.toISOString() },
        });
      },
    );

    app.get(
      '/servers',
      {
        schema: {
          operationId: 'adminListServers',
          tags,
          security,
          summary: 'Hosting servers',
          querystring: PageQuery,
          response: { 200: ServerList, ...errorResponses(400) },
        },
        config: config_,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await servers.list(page);
        return envelope(request, config.publicUrl, page, count, await Promise.all(rows.map(show)));
      },
    );

    app.get(
      '/servers/:server_id',
      {
        schema: {
          operationId: 'adminGetServer',
          tags,
          security,
          summary: 'A hosting server',
          params: ServerParams,
          response: { 200: ServerSchema, ...errorResponses(400, 404) },
        },
        config: config_,
      },
      async (request) => show(await servers.get(request.params.server_id)),
    );

    app.patch(
      '/servers/:server_id',
      {
        schema: {
          operationId: 'adminUpdateServer',
          tags,
          security,
          summary: 'Change labels, addresses, capacity or state (cordoned and draining get no new installs)',
          params: ServerParams,
          body: PatchServerBody,
          response: { 200: ServerSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: config_,
      },
      async (request) => show(await servers.patch(request.params.server_id, request.body)),
    );

    app.delete(
      '/servers/:server_id',
      {
        schema: {
          operationId: 'adminDeleteServer',
          tags,
          security,
          summary: 'Remove a hosting server (refused while installs are placed there)',
          params: ServerParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 404, 409) },
        },
        config: config_,
      },
      async (request, reply) => {
        await servers.remove(request.params.server_id);
        return reply.status(204).send(null);
      },
    );

    app.post(
      '/servers/:server_id/enrolment',
      {
        schema: {
          operationId: 'adminNewServerEnrolment',
          tags,
          security,
          summary: 'A new one-time enrolment token (re-enrolment replaces the agent credential)',
          params: ServerParams,
          response: { 201: EnrolmentSchema, ...errorResponses(400, 404) },
        },
        config: config_,
      },
      async (request, reply) => {
        const enrolment = await servers.newEnrolment(request.params.server_id);
        return reply
          .status(201)
          .send({ token: enrolment.token, expires_at: enrolment.expires_at.toISOString() });
      },
    );

    app.post(
      '/servers/:server_id/revoke',
      {
        schema: {
          operationId: 'adminRevokeServerCredential',
          tags,
          security,
          summary: "Revoke the agent's credential (its next request is refused)",
          params: ServerParams,
          response: { 200: ServerSchema, ...errorResponses(400, 404) },
        },
        config: config_,
      },
      async (request) => show(await servers.revoke(request.params.server_id)),
    );

    app.get(
      '/servers/:server_id/installs',
      {
        schema: {
          operationId: 'adminListServerInstalls',
          tags,
          security,
          summary: 'The installs placed on a server, with their placement generation',
          params: ServerParams,
          querystring: PageQuery,
          response: { 200: PlacementList, ...errorResponses(400, 404) },
        },
        config: config_,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await servers.placements(request.params.server_id, page);
        const results = rows.map((r) => ({ ...r, placed_at: r.placed_at.toISOString() }));
        return envelope(request, config.publicUrl, page, count, results);
      },
    );
  };
}
