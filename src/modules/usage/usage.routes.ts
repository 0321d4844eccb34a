import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import type { RouteContext, RoutesPlugin } from '../../http/route-context.js';
import { ErrorSchema, errorResponses } from '../../http/schemas.js';
import { withLocation } from '../operations/operations.routes.js';
import { AccountParams, InstallParams, InstallUsageSchema, UsageQuery } from './usage.schemas.js';

const NullBody = Type.Null({ description: 'OK; the body is always null (M7)' });
/** The spec's extra "unexpected error" of refresh disk usage shares the 500 body. */
const refreshErrors = {
  ...errorResponses(400, 403, 404, 502),
  500: { ...ErrorSchema, description: 'Unexpected error' },
};

export function usageRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Usage'];
    const routeConfig = { resource: 'usage' };

    app.post(
      '/installs/:install_id/usage/refresh_disk_usage',
      {
        schema: {
          operationId: 'refreshEnvironmentDiskUsage',
          tags,
          summary: 'Recalculate disk usage (M7, M8): 200 null; repeated requests join the pending one',
          params: InstallParams,
          response: { 200: NullBody, ...refreshErrors },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const operation = await services.usage.refreshInstall(callerOf(request), request.params.install_id);
        return withLocation(reply, request, config.publicUrl, operation.id).status(200).send(null);
      },
    );

    app.post(
      '/accounts/:account_id/usage/refresh_disk_usage',
      {
        schema: {
          operationId: 'refreshAccountDiskUsage',
          tags,
          summary: 'Recalculate disk usage of every active install of the account: 200 null',
          params: AccountParams,
          response: { 200: NullBody, ...refreshErrors },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        await services.usage.refreshAccount(callerOf(request), request.params.account_id);
        return reply.status(200).send(null);
      },
    );

    app.get(
      '/installs/:install_id/usage',
      {
        schema: {
          operationId: 'getInstallUsage',
          tags,
          summary: 'Daily usage metrics of an install, with the disk refresh times (M9)',
          params: InstallParams,
          querystring: UsageQuery,
          response: { 200: InstallUsageSchema, ...errorResponses(400, 403, 404, 502) },
        },
        config: routeConfig,
      },
      async (request) =>
        services.usage.installUsage(callerOf(request), request.params.install_id, request.query),
    );
  };
}
