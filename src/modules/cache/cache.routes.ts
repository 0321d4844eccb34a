import { callerOf } from '../../http/auth.js';
import { LocationHeader, withLocation } from '../../http/location.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationSchema } from '../operations/operations.schemas.js';
import { toOperation } from '../operations/operations.service.js';
import { PurgeCacheBody, PurgeCacheParams } from './cache.schemas.js';

export function cacheRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.post(
      '/installs/:install_id/purge_cache',
      {
        schema: {
          operationId: 'purgeCache',
          tags: ['Installs'],
          summary: 'Purge the object, page or CDN cache; one purge per type every 60 seconds (429 otherwise)',
          params: PurgeCacheParams,
          body: PurgeCacheBody,
          response: {
            202: { ...OperationSchema, description: 'Accepted', headers: LocationHeader },
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: { resource: 'cache' },
      },
      async (request, reply) => {
        const operation = await services.cache.purge(
          callerOf(request),
          request.params.install_id,
          request.body.type as 'object' | 'page' | 'cdn',
        );
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toOperation(operation));
      },
    );
  };
}
