import { callerOf } from '../../http/auth.js';
import { LocationHeader, withLocation } from '../../http/location.js';
import { pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses, OrDryRun } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationSchema } from '../operations/operations.schemas.js';
import { toOperation } from '../operations/operations.service.js';
import {
  CertificateList,
  CertificateOrderBody,
  CertificateSchema,
  DomainCertificateParams,
  DomainCertificateSchema,
  ImportCertificateBody,
  ImportCertificateDryRun,
  InstallCertificatesParams,
  ListCertificatesQuery,
} from './certificates.schemas.js';
import type { CertificateView } from './certificates.service.js';

/** Projection of a certificate (L2: never the private key, which the repo does not even read). */
export function toCertificate(view: CertificateView) {
  const chain = Buffer.from(view.chain_pem, 'utf8').toString('base64');
  return {
    uuid: view.id,
    install_id: view.install_id,
    common_name: view.domains[0] ?? view.subject.replace(/^.*CN=/, ''),
    domains: view.domains,
    cert_source: 'THIRD_PARTY',
    status: view.expired ? 'EXPIRED' : 'ENABLED',
    wildcard: view.domains.some((name) => name.startsWith('*.')),
    auto_renew: false,
    approved_time: view.created_at.toISOString(),
    expires_time: view.not_after.toISOString(),
    serial_number: view.serial,
    subject: view.subject,
    issuer: view.issuer,
    serial: view.serial,
    fingerprint: view.fingerprint,
    not_before: view.not_before.toISOString(),
    not_after: view.not_after.toISOString(),
    certificate: chain,
    created_at: view.created_at.toISOString(),
  };
}

/** The platform's DomainCertificate around the record. */
function toDomainCertificate(view: CertificateView) {
  const certificate = toCertificate(view);
  return {
    cert_name: certificate.common_name,
    cert_info: { cert: certificate.certificate },
    certificate,
  };
}

export function certificatesRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['SSL'];
    // G7 errors[].resource, the same for schema errors and for the L2 checks of certificate-chain.ts.
    const routeConfig = { resource: 'ssl_certificate' };

    app.post(
      '/installs/:install_id/ssl_certificates/third_party',
      {
        schema: {
          operationId: 'importThirdPartySSLCertificate',
          tags,
          summary:
            'Import a third-party certificate chain and its private key (L1, L2; `?dry_run=true`: what it would do, nothing changed)',
          params: InstallCertificatesParams,
          querystring: DryRunQuery,
          body: ImportCertificateBody,
          response: {
            200: OrDryRun(ImportCertificateDryRun, {
              ...CertificateSchema,
              description: 'The imported certificate',
            }),
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: routeConfig,
      },
      async (request) => {
        if (request.query.dry_run) {
          return services.certificates.importDryRun(
            callerOf(request),
            request.params.install_id,
            request.body,
          );
        }
        const view = await services.certificates.importThirdParty(
          callerOf(request),
          request.params.install_id,
          request.body,
        );
        return toCertificate(view);
      },
    );

    app.get(
      '/installs/:install_id/ssl_certificates',
      {
        schema: {
          operationId: 'getInstallCertificates',
          tags,
          summary: 'List the certificates of an install',
          params: InstallCertificatesParams,
          querystring: ListCertificatesQuery,
          response: { 200: CertificateList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.certificates.list(
          callerOf(request),
          request.params.install_id,
          page,
        );
        const next = page.limit > 0 && page.offset + page.limit < count ? page.offset + page.limit : null;
        return {
          certificates: rows.map(toCertificate),
          ...(next !== null && { next_page_token: String(next) }),
        };
      },
    );

    app.get(
      '/installs/:install_id/domains/:domain_id/ssl_certificate',
      {
        schema: {
          operationId: 'getDomainCertificate',
          tags,
          summary: 'The certificate that serves a domain (404 when none covers it)',
          params: DomainCertificateParams,
          response: { 200: DomainCertificateSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const { install_id, domain_id } = request.params;
        return toDomainCertificate(
          await services.certificates.forDomain(callerOf(request), install_id, domain_id),
        );
      },
    );

    app.post(
      '/installs/:install_id/domains/:domain_id/ssl_certificate',
      {
        schema: {
          operationId: 'createDomainCertificateOrder',
          tags,
          summary: "Order a certificate for a verified domain from the platform's CA; 202 with the operation",
          params: DomainCertificateParams,
          body: CertificateOrderBody,
          response: {
            202: {
              ...OperationSchema,
              description: 'Accepted: the order operation',
              headers: LocationHeader,
            },
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        // No Bad Request in the reference table: a malformed path id names nothing (404).
        config: { ...routeConfig, badPathIsNotFound: true },
      },
      async (request, reply) => {
        const { install_id, domain_id } = request.params;
        const operation = await services.certificateOrders.order(
          callerOf(request),
          install_id,
          domain_id,
          request.body,
        );
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toOperation(operation));
      },
    );
  };
}
