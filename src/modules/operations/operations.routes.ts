import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { baseUrl, envelope, pageOf } from '../../http/pagination.js';
import type { RouteContext, RoutesPlugin } from '../../http/route-context.js';
import { errorResponses, Uuid } from '../../http/schemas.js';
import { OperationList, OperationParams, OperationSchema, OperationsQuery } from './operations.schemas.js';
import { toOperation } from './operations.service.js';

/** The absolute URL of an operation (PUBLIC_URL, else the request's host). */
export function operationUrl(request: FastifyRequest, publicUrl: string | null, operationId: string): string {
  return `${baseUrl(request, publicUrl)}/v1/operations/${operationId}`;
}

/** Every asynchronous answer carries its operation's URL (design.md: operations). */
export function withLocation(
  reply: FastifyReply,
  request: FastifyRequest,
  publicUrl: string | null,
  operationId: string,
): FastifyReply {
  return reply.header('location', operationUrl(request, publicUrl, operationId));
}

export function operationsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Operations'];
    const routeConfig = { resource: 'operation' };

    app.get(
      '/operations/:operation_id',
      {
        schema: {
          operationId: 'getOperation',
          tags,
          summary: 'An asynchronous operation (Hostplane extension)',
          params: OperationParams,
          response: { 200: OperationSchema, ...errorResponses(400, 404) },
        },
        config: routeConfig,
      },
      async (request) =>
        toOperation(await services.operations.get(callerOf(request), request.params.operation_id)),
    );

    app.get(
      '/installs/:install_id/operations',
      {
        schema: {
          operationId: 'listInstallOperations',
          tags,
          summary: "An install's operations, newest first (Hostplane extension)",
          params: Type.Object({ install_id: Uuid() }),
          querystring: OperationsQuery,
          response: { 200: OperationList, ...errorResponses(400, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.operations.listForInstall(
          callerOf(request),
          request.params.install_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toOperation));
      },
    );
  };
}
