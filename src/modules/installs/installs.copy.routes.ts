import { callerOf } from '../../http/auth.js';
import { LocationHeader, withLocation } from '../../http/location.js';
import { DryRunQuery, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationSchema } from '../operations/operations.schemas.js';
import { toOperation } from '../operations/operations.service.js';
import { CopyInstallBody, CopyInstallDryRun } from './installs.copy.schemas.js';

export function installCopyRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.post(
      '/install_copy',
      {
        schema: {
          operationId: 'copyInstall',
          tags: ['Installs'],
          summary:
            "Copy one install's files and/or database over another of the account (C1-C6; `?dry_run=true`: what it would do, nothing changed)",
          querystring: DryRunQuery,
          body: CopyInstallBody,
          response: {
            200: CopyInstallDryRun,
            202: { ...OperationSchema, description: 'Accepted', headers: LocationHeader },
            ...errorResponses(400, 403, 404, 413, 415, 502),
          },
        },
        config: { resource: 'install_copy' },
      },
      async (request, reply) => {
        if (request.query.dry_run) return services.installCopy.copyDryRun(callerOf(request), request.body);
        const operation = await services.installCopy.copy(callerOf(request), request.body);
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toOperation(operation));
      },
    );
  };
}
