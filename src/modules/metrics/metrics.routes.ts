import { Type } from 'typebox';
import { bearerAuthHook } from '../../http/auth.js';
import { errorResponses, publicErrorResponses } from '../../http/schemas.js';
import type { RoutesPlugin } from '../../route-context.js';
import type { Metrics } from './metrics.service.js';

/**
 * GET /metrics: Prometheus text of this process. Outside the API's Basic auth and rate limit; when
 * METRICS_TOKEN is set, it takes `Authorization: Bearer <METRICS_TOKEN>` (compared in constant time).
 */
export function metricsRoutes(metrics: Metrics, token: string | null): RoutesPlugin {
  return async (app) => {
    app.get(
      '/metrics',
      {
        ...(token && { onRequest: bearerAuthHook([token]) }),
        schema: {
          operationId: 'metrics',
          tags: ['System'],
          summary: 'Prometheus metrics of this process (text exposition format)',
          security: token ? [{ metricsToken: [] }] : [],
          response: {
            200: Type.String({ description: 'Prometheus text exposition format 0.0.4' }),
            ...(token ? errorResponses() : publicErrorResponses()),
          },
        },
      },
      async (_request, reply) => {
        const text = await metrics.scrape();
        return reply.type(metrics.contentType).send(text);
      },
    );
  };
}
