import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { withLocation } from '../../http/location.js';
import { ErrorSchema, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  AccountParams,
  AccountUsageQuery,
  AccountUsageSchema,
  IngestBody,
  IngestResultSchema,
  InsightsSchema,
  InstallParams,
  InstallUsageSchema,
  LimitsBody,
  LimitsSchema,
  MAX_INGEST_ROWS,
  MetricsRollupSchema,
  UsageQuery,
} from './usage.schemas.js';

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
          operationId: 'getInstallUsageMetrics',
          tags,
          summary: 'Daily usage metrics of an install, most recent first, with the disk refresh times (M9)',
          params: InstallParams,
          querystring: UsageQuery,
          response: { 200: InstallUsageSchema, ...errorResponses(400, 403, 404, 502) },
        },
        config: routeConfig,
      },
      async (request) =>
        services.usage.installUsage(callerOf(request), request.params.install_id, request.query),
    );

    const rangeErrors = errorResponses(400, 403, 404, 502);
    app.get(
      '/accounts/:account_id/usage/insights',
      {
        schema: {
          operationId: 'getAccountUsageInsights',
          tags,
          summary: 'Eight metrics with breakdowns by environment and site type (M1-M5)',
          params: AccountParams,
          querystring: UsageQuery,
          response: { 200: InsightsSchema, ...rangeErrors },
        },
        config: routeConfig,
      },
      async (request) =>
        services.usageAccounts.insights(callerOf(request), request.params.account_id, request.query),
    );

    app.get(
      '/accounts/:account_id/usage/summary',
      {
        schema: {
          operationId: 'getAccountUsageSummary',
          tags,
          summary: 'Eight metric rollups: average, sum, latest (M1-M4, M6)',
          params: AccountParams,
          querystring: UsageQuery,
          response: { 200: MetricsRollupSchema, ...rangeErrors },
        },
        config: routeConfig,
      },
      async (request) =>
        services.usageAccounts.summary(callerOf(request), request.params.account_id, request.query),
    );

    app.get(
      '/accounts/:account_id/usage',
      {
        schema: {
          operationId: 'getAccountUsageMetrics',
          tags,
          summary: 'Daily usage of each environment of the account (M1-M4), a page at a time',
          params: AccountParams,
          querystring: AccountUsageQuery,
          response: { 200: AccountUsageSchema, ...rangeErrors },
        },
        config: routeConfig,
      },
      async (request) =>
        services.usageAccounts.accountUsage(callerOf(request), request.params.account_id, request.query),
    );

    app.get(
      '/accounts/:account_id/limits',
      {
        schema: {
          operationId: 'getAccountsLimits',
          tags: ['Account'],
          summary: "The account's limits: set by an operator, else its plan's",
          params: AccountParams,
          response: { 200: LimitsSchema, ...errorResponses(400, 403, 404, 502) },
        },
        config: { resource: 'account' },
      },
      async (request) => services.usageAccounts.limits(callerOf(request), request.params.account_id),
    );
  };
}

/** Operators: usage ingestion and account limits (under /admin/v1, Bearer token). */
export function usageAdminRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Admin'];
    const security = [{ adminToken: [] }];

    app.post(
      '/usage',
      {
        // 10,000 rows with every metric as a 19-digit string are about 4.5 MB.
        bodyLimit: 8 * 1024 * 1024,
        schema: {
          operationId: 'adminIngestUsage',
          tags,
          security,
          summary: `Upsert daily usage per install and day (at most ${MAX_INGEST_ROWS} rows; absent metrics keep, null clears)`,
          body: IngestBody,
          response: { 200: IngestResultSchema, ...errorResponses(400, 413, 415) },
        },
        config: { resource: 'usage' },
      },
      async (request) => services.usage.ingest(request.body.rows),
    );

    app.put(
      '/accounts/:account_id/limits',
      {
        schema: {
          operationId: 'adminPutAccountLimits',
          tags,
          security,
          params: AccountParams,
          body: LimitsBody,
          response: { 200: LimitsSchema, ...errorResponses(400, 404, 413, 415) },
        },
        config: { resource: 'account' },
      },
      async (request) => services.usageAccounts.setLimits(request.params.account_id, request.body),
    );

    app.delete(
      '/accounts/:account_id/limits',
      {
        schema: {
          operationId: 'adminResetAccountLimits',
          tags,
          security,
          summary: "Back to the plan's limits",
          params: AccountParams,
          response: { 200: LimitsSchema, ...errorResponses(400, 404) },
        },
        config: { resource: 'account' },
      },
      async (request) => services.usageAccounts.resetLimits(request.params.account_id),
    );
  };
}
