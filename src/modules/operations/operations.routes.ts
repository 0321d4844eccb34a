import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { errorResponses, Uuid } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationList, OperationParams, OperationSchema, OperationsQuery } from './operations.schemas.js';
import { toOperation } from './operations.service.js';

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
          description:
            'A completed provisioning on a host that installs WordPress carries `wordpress_admin`: its password is shown once, to the first read by an owner of the account (not through a scoped credential), and erased by it; later reads show the username and login URL only.',
          params: OperationParams,
          response: { 200: OperationSchema, ...errorResponses(400, 404) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const operation = await services.operations.get(callerOf(request), request.params.operation_id);
        // Issue 21: a body showing a secret is kept by no cache, neither ours (read cache) nor the client's.
        if (operation.wordpress_admin?.password !== undefined) {
          request.readCache = null;
          reply.header('cache-control', 'private, no-store');
        }
        return operation;
      },
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
        return envelope(
          request,
          config.publicUrl,
          page,
          count,
          rows.map((row) => toOperation(row)),
        );
      },
    );
  };
}
