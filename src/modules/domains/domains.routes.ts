import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses, OrDryRun } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  BulkDomainsResponse,
  CreateBulkDomainsBody,
  CreateDomainBody,
  DomainList,
  DomainParams,
  DomainSchema,
  InstallDomainsParams,
  ListDomainsQuery,
  UpdateDomainBody,
  UpdateDomainDryRun,
} from './domains.schemas.js';
import type { DomainView } from './domains.service.js';

/** Projection into the spec's Domain record. */
export function toDomain(view: DomainView) {
  return {
    id: view.id,
    name: view.name,
    duplicate: view.duplicate,
    primary: view.primary,
    secure_all_urls: view.secure_all_urls,
    network_type: 'AN',
    network_details: {
      dns_config_info: { cname: view.cname, a_records: view.a_records },
      network_info: {
        status: view.ownership_status === 'TXT_VERIFIED' ? 'ACTIVE' : 'PENDING',
        ssl: { status: view.ssl_status },
      },
    },
    redirects_to:
      view.redirect_to_id && view.redirect_to_name
        ? [{ id: view.redirect_to_id, name: view.redirect_to_name }]
        : [],
    txt_verified_time: view.txt_verified_time?.toISOString() ?? null,
    ...(view.txt_verified_domain !== null && { txt_verified_domain: view.txt_verified_domain }),
    txt_verification_key: view.txt_verification_key,
    txt_verification_value: view.txt_verification_value,
    ownership_status: view.ownership_status,
  };
}

export function domainsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Domains'];
    const routeConfig = { resource: 'domain' };
    const base = '/installs/:install_id/domains';

    app.get(
      base,
      {
        schema: {
          operationId: 'listDomains',
          tags,
          summary: 'List the domains of an install (D1)',
          params: InstallDomainsParams,
          querystring: ListDomainsQuery,
          response: { 200: DomainList, ...errorResponses(400, 403, 404) },
        },
        config: { ...routeConfig, badPathIsNotFound: true },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { install_id } = request.params;
        const { count, rows, validUntil } = await services.domains.list(callerOf(request), install_id, page);
        // SSL statuses change with the clock: the read cache keeps this body no longer (issue 14).
        request.bodyValidUntil = validUntil;
        return envelope(request, config.publicUrl, page, count, rows.map(toDomain));
      },
    );

    app.post(
      base,
      {
        schema: {
          operationId: 'createDomain',
          tags,
          summary: 'Add a domain to an install; it starts TXT_VERIFICATION_PENDING (D3, D4, D5, D7)',
          params: InstallDomainsParams,
          body: CreateDomainBody,
          response: { 201: DomainSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const view = await services.domains.create(
          callerOf(request),
          request.params.install_id,
          request.body,
        );
        return reply.status(201).send(toDomain(view));
      },
    );

    app.post(
      `${base}/bulk`,
      {
        schema: {
          operationId: 'createBulkDomains',
          tags,
          summary: 'Add up to 50 domains at once: all or nothing, problems listed per item',
          params: InstallDomainsParams,
          body: CreateBulkDomainsBody,
          response: { 201: BulkDomainsResponse, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const views = await services.domains.createBulk(
          callerOf(request),
          request.params.install_id,
          request.body.domains,
        );
        return reply.status(201).send({ domains: views.map(toDomain) });
      },
    );

    app.get(
      `${base}/:domain_id`,
      {
        schema: {
          operationId: 'getDomain',
          tags,
          summary: 'Get a domain (D1)',
          params: DomainParams,
          response: { 200: DomainSchema, ...errorResponses(403, 404) },
        },
        config: { ...routeConfig, badPathIsNotFound: true },
      },
      async (request) => {
        const { install_id, domain_id } = request.params;
        return toDomain(await services.domains.get(callerOf(request), install_id, domain_id));
      },
    );

    app.patch(
      `${base}/:domain_id`,
      {
        schema: {
          operationId: 'updateDomain',
          tags,
          summary:
            'Set primary, redirect_to (or "nil") and secure_all_urls (D2-D6; `?dry_run=true`: what it would change, nothing changed)',
          params: DomainParams,
          querystring: DryRunQuery,
          body: UpdateDomainBody,
          response: {
            200: OrDryRun(UpdateDomainDryRun, { ...DomainSchema, description: 'The domain as changed' }),
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: routeConfig,
      },
      async (request) => {
        const { install_id, domain_id } = request.params;
        if (request.query.dry_run) {
          return services.domains.updateDryRun(callerOf(request), install_id, domain_id, request.body);
        }
        const view = await services.domains.update(callerOf(request), install_id, domain_id, request.body);
        return toDomain(view);
      },
    );

    app.delete(
      `${base}/:domain_id`,
      {
        schema: {
          operationId: 'deleteDomain',
          tags,
          summary: 'Remove a domain; refused for the primary domain and for a redirect target',
          params: DomainParams,
          response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const { install_id, domain_id } = request.params;
        await services.domains.remove(callerOf(request), install_id, domain_id);
        return reply.status(204).send(null);
      },
    );

    app.post(
      `${base}/:domain_id/verification`,
      {
        schema: {
          operationId: 'verifyDomainTxtRecord',
          tags,
          summary: 'Look the TXT ownership record up now (D7)',
          description:
            'Looks up the TXT record named by txt_verification_key. When one of its records holds ' +
            'txt_verification_value, the domain becomes TXT_VERIFIED; otherwise it stays ' +
            'TXT_VERIFICATION_PENDING. Either way the answer is 200 with the domain. A DNS failure ' +
            '(timeout, SERVFAIL, refused) is a 503 and an unreadable DNS answer a 502; neither changes the domain.',
          params: DomainParams,
          response: { 200: DomainSchema, ...errorResponses(400, 403, 404, 413, 415, 502) },
        },
        config: routeConfig,
      },
      async (request) => {
        const { install_id, domain_id } = request.params;
        return toDomain(await services.domains.verify(callerOf(request), install_id, domain_id));
      },
    );
  };
}
