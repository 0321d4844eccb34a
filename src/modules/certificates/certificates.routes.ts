import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import type { RouteContext, RoutesPlugin } from '../../http/route-context.js';
import { errorResponses } from '../../http/schemas.js';
import {
  CertificateList,
  CertificateSchema,
  DomainCertificateParams,
  ImportCertificateBody,
  InstallCertificatesParams,
  ListCertificatesQuery,
} from './certificates.schemas.js';
import type { CertificateView } from './certificates.service.js';

/** Projection of a certificate (L2: never the private key, which the repo does not even read). */
export function toCertificate(view: CertificateView) {
  return {
    id: view.id,
    install_id: view.install_id,
    domains: view.domains,
    subject: view.subject,
    issuer: view.issuer,
    serial: view.serial,
    fingerprint: view.fingerprint,
    not_before: view.not_before.toISOString(),
    not_after: view.not_after.toISOString(),
    certificate: Buffer.from(view.chain_pem, 'utf8').toString('base64'),
    created_at: view.created_at.toISOString(),
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
          summary: 'Import a third-party certificate chain and its private key (L1, L2)',
          params: InstallCertificatesParams,
          body: ImportCertificateBody,
          response: { 200: CertificateSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request) => {
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
        return envelope(request, config.publicUrl, page, count, rows.map(toCertificate));
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
          response: { 200: CertificateSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const { install_id, domain_id } = request.params;
        return toCertificate(await services.certificates.forDomain(callerOf(request), install_id, domain_id));
      },
    );
  };
}
