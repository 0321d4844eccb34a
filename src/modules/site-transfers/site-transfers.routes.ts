import { Type } from 'typebox';
import { callerOf } from '../../http/auth.js';
import { LocationHeader, withLocation } from '../../http/location.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  AccountTransfersParams,
  CreateSiteTransferBody,
  SiteTransferDryRun,
  SiteTransferList,
  SiteTransferParams,
  SiteTransferSchema,
  SiteTransfersParams,
  SiteTransfersQuery,
} from './site-transfers.schemas.js';
import type { TransferRow } from './site-transfers.service.js';

/** Projection of a transfer row into the reference's SiteTransfer record (T10: the snapshots). */
export function toSiteTransfer(row: TransferRow) {
  return {
    id: row.id,
    site: row.site_name,
    installs: row.install_names,
    origin_account: row.origin_account_name,
    destination_account: row.destination_account_name,
    status: row.status,
    scheduled_time: row.scheduled_time?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function siteTransfersRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Site Transfer'];
    const routeConfig = { resource: 'site_transfer' };

    app.get(
      '/accounts/:account_id/site_transfers',
      {
        schema: {
          operationId: 'listAccountSiteTransfers',
          tags,
          summary: 'List the site transfers initiated from an account (T1)',
          params: AccountTransfersParams,
          querystring: SiteTransfersQuery,
          response: { 200: SiteTransferList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.siteTransfers.listForAccount(
          callerOf(request),
          request.params.account_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toSiteTransfer));
      },
    );

    app.get(
      '/sites/:site_id/site_transfers',
      {
        schema: {
          operationId: 'listSiteTransfers',
          tags,
          summary: 'List the transfers of a site',
          params: SiteTransfersParams,
          querystring: SiteTransfersQuery,
          response: { 200: SiteTransferList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.siteTransfers.listForSite(
          callerOf(request),
          request.params.site_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toSiteTransfer));
      },
    );

    app.post(
      '/sites/:site_id/site_transfers',
      {
        schema: {
          operationId: 'createSiteTransfer',
          tags,
          summary:
            'Initiate a site transfer (T2-T8); 202 with the record and its operation in Location (`?dry_run=true`: what it would do, nothing changed)',
          params: SiteTransfersParams,
          querystring: DryRunQuery,
          body: CreateSiteTransferBody,
          response: {
            200: SiteTransferDryRun,
            202: { ...SiteTransferSchema, description: 'Transfer accepted', headers: LocationHeader },
            ...errorResponses(400, 403, 404, 409, 413, 415, 422),
          },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        if (request.query.dry_run) {
          return services.siteTransfers.createDryRun(callerOf(request), request.params.site_id, request.body);
        }
        const { transfer, operation } = await services.siteTransfers.create(
          callerOf(request),
          request.params.site_id,
          request.body,
        );
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toSiteTransfer(transfer));
      },
    );

    app.get(
      '/sites/:site_id/site_transfers/:transfer_id',
      {
        schema: {
          operationId: 'getSiteTransfer',
          tags,
          summary: 'Get a site transfer',
          params: SiteTransferParams,
          response: { 200: SiteTransferSchema, ...errorResponses(403, 404) },
        },
        // G12: the reference lists no 400 here; a malformed id names nothing (404).
        config: { ...routeConfig, badPathIsNotFound: true },
      },
      async (request) =>
        toSiteTransfer(
          await services.siteTransfers.get(
            callerOf(request),
            request.params.site_id,
            request.params.transfer_id,
          ),
        ),
    );

    app.delete(
      '/sites/:site_id/site_transfers/:transfer_id',
      {
        schema: {
          operationId: 'cancelSiteTransfer',
          tags,
          summary: 'Cancel a transfer that has not started (T9): 204, or 409 once it has',
          params: SiteTransferParams,
          response: {
            204: Type.Null({ description: 'Transfer cancelled' }),
            ...errorResponses(403, 404, 409),
          },
        },
        config: { ...routeConfig, badPathIsNotFound: true },
      },
      async (request, reply) => {
        await services.siteTransfers.cancel(
          callerOf(request),
          request.params.site_id,
          request.params.transfer_id,
        );
        return reply.status(204).send(null);
      },
    );
  };
}
