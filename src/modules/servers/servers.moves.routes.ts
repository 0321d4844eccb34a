import { LocationHeader, withLocation } from '../../http/location.js';
import { DryRunQuery, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationSchema } from '../operations/operations.schemas.js';
import { toOperation } from '../operations/operations.service.js';
import { toServer } from './servers.routes.js';
import {
  DrainSchema,
  InstallParams,
  MoveBody,
  MoveDryRun,
  MoveViewSchema,
  ServerParams,
  UndrainSchema,
} from './servers.schemas.js';

/** Issue 30: moving installs between hosting servers, and draining a server (admin token). */
export function movesRoutes({ config, services }: RouteContext): RoutesPlugin {
  const { moves, servers } = services;
  return async (app) => {
    const tags = ['Admin: servers'];
    const security = [{ adminToken: [] }];

    app.get(
      '/installs/:install_id/move',
      {
        schema: {
          operationId: 'adminGetInstallMove',
          tags,
          security,
          summary: "An install's server and its latest move (`moving`, `move_failed`)",
          params: InstallParams,
          response: { 200: MoveViewSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'install' },
      },
      async (request) => moves.view(request.params.install_id),
    );

    app.post(
      '/installs/:install_id/move',
      {
        schema: {
          operationId: 'adminMoveInstall',
          tags,
          security,
          summary:
            'Move an install to another hosting server (202 with the operation; `?dry_run=true`: the server it would go to, nothing changed)',
          params: InstallParams,
          querystring: DryRunQuery,
          body: MoveBody,
          response: {
            200: MoveDryRun,
            202: { ...OperationSchema, description: 'Accepted, move started', headers: LocationHeader },
            ...errorResponses(400, 404, 409, 413, 415),
          },
        },
        config: { resource: 'install' },
      },
      async (request, reply) => {
        const { install_id } = request.params;
        const target = request.body?.server_id ?? null;
        if (request.query.dry_run) return moves.moveDryRun(install_id, target);
        const operation = await moves.move(install_id, target);
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toOperation(operation));
      },
    );

    app.post(
      '/installs/:install_id/move/cancel',
      {
        schema: {
          operationId: 'adminCancelInstallMove',
          tags,
          security,
          summary:
            'Cancel an open move: it rolls back and the source keeps serving (409 once it has switched)',
          params: InstallParams,
          response: { 200: MoveViewSchema, ...errorResponses(400, 404, 409) },
        },
        config: { resource: 'install' },
      },
      async (request) => moves.cancel(request.params.install_id),
    );

    app.post(
      '/servers/:server_id/drain',
      {
        schema: {
          operationId: 'adminDrainServer',
          tags,
          security,
          summary:
            'Drain a server: it gets no new installs (`draining`) and each of its installs starts a move to the server placement picks',
          params: ServerParams,
          response: { 200: DrainSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'server' },
      },
      async (request) => moves.drain(request.params.server_id),
    );

    app.post(
      '/servers/:server_id/undrain',
      {
        schema: {
          operationId: 'adminUndrainServer',
          tags,
          security,
          summary: "End a drain: the server is active again and the drain's moves not switched yet roll back",
          params: ServerParams,
          response: { 200: UndrainSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'server' },
      },
      async (request) => {
        const { cancelled } = await moves.undrain(request.params.server_id);
        const row = await servers.get(request.params.server_id);
        return {
          server: toServer(row, servers.statusOf(row), await moves.drainProgress(row.id)),
          cancelled,
        };
      },
    );
  };
}
