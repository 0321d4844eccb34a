import { Type } from 'typebox';
import { publicErrorResponses } from '../../http/schemas.js';
import type { RoutesPlugin } from '../../route-context.js';

const Health = Type.Object({ status: Type.String() });

/**
 * Process and database health for orchestrators; no auth, not rate limited. `databaseReady` asks
 * the database (db/client.ts `ping`) and throws when it does not answer.
 */
export function healthRoutes(databaseReady: () => Promise<void>): RoutesPlugin {
  return async (app) => {
    app.get(
      '/healthz',
      {
        schema: { operationId: 'healthz', tags: ['System'], security: [], response: { 200: Health } },
      },
      async () => ({ status: 'ok' }),
    );
    app.get(
      '/readyz',
      {
        schema: {
          operationId: 'readyz',
          tags: ['System'],
          security: [],
          response: { 200: Health, ...publicErrorResponses() },
        },
      },
      // A database error becomes a 503 through the error renderer (G11).
      async () => {
        await databaseReady();
        return { status: 'ok' };
      },
    );
  };
}

/** GET /v1/status and GET /v1/swagger: public, no auth. */
export function publicRoutes(openapi: () => unknown, clockNow: () => Date): RoutesPlugin {
  return async (app) => {
    app.get(
      '/status',
      {
        schema: {
          operationId: 'status',
          tags: ['System'],
          summary: 'API status',
          security: [],
          response: {
            200: Type.Object({ success: Type.Boolean(), created_on: Type.String({ format: 'date-time' }) }),
            ...publicErrorResponses(),
          },
        },
      },
      async () => ({ success: true, created_on: clockNow().toISOString() }),
    );
    app.get(
      '/swagger',
      {
        schema: {
          operationId: 'swagger',
          tags: ['System'],
          summary: 'The OpenAPI 3.1 document of this API',
          security: [],
          response: { 200: Type.Object({}, { additionalProperties: true }), ...publicErrorResponses() },
        },
      },
      async () => openapi(),
    );
  };
}
