import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  CreateSiteBody,
  ListSitesQuery,
  SiteList,
  SiteParams,
  SiteSchema,
  UpdateSiteBody,
} from './sites.schemas.js';
import type { SiteWithInstalls } from './sites.service.js';

/** Projection of a site row into the spec's Site record (S3). */
export function toSite(site: SiteWithInstalls, installDomain: string) {
  return {
    id: site.id,
    name: site.name,
    account: { id: site.account_id },
    group_name: site.group_name,
    tags: site.tags,
    created_at: site.created_at.toISOString(),
    sandbox: site.sandbox,
    transferable: site.transferable,
    installs: site.installs.map((i) => ({
      id: i.id,
      name: i.name,
      environment: i.environment,
      cname: `${i.name}.${installDomain}`,
      php_version: i.php_version,
      is_multisite: i.is_multisite,
    })),
  };
}

export function sitesRoutes({ config, services }: RouteContext): RoutesPlugin {
  const project = (site: SiteWithInstalls) => toSite(site, config.installDomain);
  return async (app) => {
    const tags = ['Sites'];
    const routeConfig = { resource: 'site' };

    app.get(
      '/sites',
      {
        schema: {
          operationId: 'listSites',
          tags,
          summary: 'List sites (S1)',
          querystring: ListSitesQuery,
          response: { 200: SiteList, ...errorResponses(400) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.sites.list(callerOf(request), page, request.query.account_id);
        return envelope(request, config.publicUrl, page, count, rows.map(project));
      },
    );

    app.post(
      '/sites',
      {
        schema: {
          operationId: 'createSite',
          tags,
          summary: 'Create a site (S2)',
          body: CreateSiteBody,
          response: { 201: SiteSchema, ...errorResponses(400, 403, 413, 415) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const site = await services.sites.create(callerOf(request), request.body);
        return reply.status(201).send(project(site));
      },
    );

    app.get(
      '/sites/:site_id',
      {
        schema: {
          operationId: 'getSite',
          tags,
          summary: 'Get a site',
          params: SiteParams,
          response: { 200: SiteSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => project(await services.sites.get(callerOf(request), request.params.site_id)),
    );

    app.patch(
      '/sites/:site_id',
      {
        schema: {
          operationId: 'updateSite',
          tags,
          summary: 'Change a site',
          params: SiteParams,
          body: UpdateSiteBody,
          response: { 200: SiteSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request) =>
        project(await services.sites.update(callerOf(request), request.params.site_id, request.body)),
    );

    app.delete(
      '/sites/:site_id',
      {
        schema: {
          operationId: 'deleteSite',
          tags,
          summary: 'Delete an empty site',
          params: SiteParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        await services.sites.remove(callerOf(request), request.params.site_id);
        return reply.status(204).send(null);
      },
    );
  };
}
