import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  CreateInstallBody,
  InstallDeleteDryRun,
  InstallDetailSchema,
  InstallList,
  InstallParams,
  ListInstallsQuery,
  UpdateInstallBody,
} from './installs.schemas.js';
import type { InstallRow } from './installs.service.js';

/** Projection of an install row into the spec's Install record (list form). */
export function toInstall(row: InstallRow, installDomain: string) {
  return {
    id: row.id,
    name: row.name,
    account: { id: row.account_id },
    php_version: row.php_version,
    status: row.status,
    site: row.site_id ? { id: row.site_id } : null,
    cname: `${row.name}.${installDomain}`,
    stable_ips: row.stable_ips,
    environment: row.environment,
    primary_domain: row.primary_domain,
    is_multisite: row.is_multisite,
    created_at: row.created_at.toISOString(),
  };
}

/** I8: the single-install form adds wp_version and defer_wordpress_upgrades_until. */
export function toInstallDetail(row: InstallRow, installDomain: string) {
  return {
    ...toInstall(row, installDomain),
    wp_version: row.wp_version,
    defer_wordpress_upgrades_until: row.defer_wordpress_upgrades_until?.toISOString() ?? null,
    maintenance_mode: row.maintenance_mode,
  };
}

export function installsRoutes({ config, services }: RouteContext): RoutesPlugin {
  const detail = (row: InstallRow) => toInstallDetail(row, config.installDomain);
  return async (app) => {
    const tags = ['Installs'];
    const routeConfig = { resource: 'install' };

    app.get(
      '/installs',
      {
        schema: {
          operationId: 'listInstalls',
          tags,
          summary: 'List installs',
          querystring: ListInstallsQuery,
          response: { 200: InstallList, ...errorResponses(400) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.installs.list(
          callerOf(request),
          page,
          request.query.account_id,
        );
        return envelope(
          request,
          config.publicUrl,
          page,
          count,
          rows.map((r) => toInstall(r, config.installDomain)),
        );
      },
    );

    app.post(
      '/installs',
      {
        schema: {
          operationId: 'createInstall',
          tags,
          summary: 'Create an install (I1-I5)',
          body: CreateInstallBody,
          response: { 201: InstallDetailSchema, ...errorResponses(400, 403, 413, 415) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const row = await services.installs.create(callerOf(request), request.body);
        return reply.status(201).send(detail(row));
      },
    );

    app.get(
      '/installs/:install_id',
      {
        schema: {
          operationId: 'getInstall',
          tags,
          summary: 'Get an install (I8)',
          params: InstallParams,
          response: { 200: InstallDetailSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => detail(await services.installs.get(callerOf(request), request.params.install_id)),
    );

    app.patch(
      '/installs/:install_id',
      {
        schema: {
          operationId: 'updateInstall',
          tags,
          summary: 'Move an install to another site or environment (I6)',
          params: InstallParams,
          body: UpdateInstallBody,
          response: { 200: InstallDetailSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request) =>
        detail(await services.installs.update(callerOf(request), request.params.install_id, request.body)),
    );

    app.delete(
      '/installs/:install_id',
      {
        schema: {
          operationId: 'deleteInstall',
          tags,
          summary:
            'Delete an install and its child records (`?dry_run=true`: what it would do, nothing changed)',
          params: InstallParams,
          querystring: DryRunQuery,
          response: {
            200: InstallDeleteDryRun,
            204: Type.Null({ description: 'Deleted' }),
            ...errorResponses(400, 403, 404, 409),
          },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        if (request.query.dry_run) {
          return services.installs.removeDryRun(callerOf(request), request.params.install_id);
        }
        await services.installs.remove(callerOf(request), request.params.install_id);
        return reply.status(204).send(null);
      },
    );
  };
}
