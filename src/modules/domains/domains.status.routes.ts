import { callerOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  CheckStatusParams,
  DomainReportSchema,
  DomainReportStatusSchema,
  ReportParams,
} from './domains.status.schemas.js';
import type { DomainStatusService } from './domains.status.service.js';

type Found = Awaited<ReturnType<DomainStatusService['get']>>;

/** Projection into the reference's DomainStatusReport. */
function toReport({ install, report, result }: Found) {
  const ip = (install.server_ipv4 ?? install.stable_ips)?.[0];
  return {
    report: {
      complete: report.completed_at !== null,
      id: report.id,
      install_name: install.name,
      ...(ip && { install_ip: ip }),
      admin: false,
      domains: [result ?? { name: report.domain_name, install_name: install.name, complete: false }],
    },
  };
}

export function domainStatusRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Domains'];
    // Neither operation's table has a Bad Request: a malformed path id names nothing (404).
    const config = { resource: 'domain', badPathIsNotFound: true };

    app.post(
      '/installs/:install_id/domains/:domain_id/check_status',
      {
        schema: {
          operationId: 'checkStatus',
          tags,
          summary: 'Check where a domain points (DNS, as a job); 202 with the report id, 429 within 5 s',
          params: CheckStatusParams,
          response: { 202: DomainReportSchema, ...errorResponses(403, 404) },
        },
        config,
      },
      async (request, reply) => {
        const { install_id, domain_id } = request.params;
        const report = await services.domainStatus.request(callerOf(request), install_id, domain_id);
        return reply.status(202).send({ report_id: report.id });
      },
    );

    app.get(
      '/installs/:install_id/domains/check_status/:report_id',
      {
        schema: {
          operationId: 'getDomainReportStatus',
          tags,
          summary: 'A domain status report: complete once its DNS check has run',
          params: ReportParams,
          response: { 200: DomainReportStatusSchema, ...errorResponses(403, 404) },
        },
        config,
      },
      async (request) => {
        const { install_id, report_id } = request.params;
        return toReport(await services.domainStatus.get(callerOf(request), install_id, report_id));
      },
    );
  };
}
