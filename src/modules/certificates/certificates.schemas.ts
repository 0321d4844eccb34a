import { Type } from 'typebox';
import { PageQuery } from '../../http/pagination.js';
import { DateTime, DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';

/** Values of the platform's Certificate enums that Hostplane answers. */
export const CERT_SOURCES = ['THIRD_PARTY'] as const;
export const CERT_STATUSES = ['ENABLED', 'EXPIRED'] as const;

/** L1: base64-encoded PEM; bounds leave room for a long chain and a 4096-bit RSA key. */
export const ImportCertificateBody = Type.Object({
  certificate: Type.String({
    minLength: 1,
    maxLength: 65_536,
    description: 'Base64-encoded PEM chain: the end-entity certificate first, then every intermediate',
  }),
  private_key: Type.String({
    minLength: 1,
    maxLength: 16_384,
    description: 'Base64-encoded PEM private key matching the end-entity certificate (unencrypted)',
  }),
});

/**
 * L2: what an imported certificate shows, never the private key. The platform's Certificate fields
 * (common_name, cert_source, status, wildcard, expires_time, serial_number...) plus Hostplane's X.509
 * details. The platform types `id` as an integer; Hostplane's certificate id is a uuid, so it is `uuid`.
 */
export const CertificateSchema = Type.Object({
  uuid: Uuid({ description: "Hostplane's id of the certificate" }),
  install_id: Uuid(),
  common_name: Type.String({ description: 'The first domain the certificate covers, else its subject CN' }),
  domains: Type.Array(Type.String(), { description: "The install's domains the certificate covers" }),
  cert_source: Type.String({ enum: [...CERT_SOURCES] }),
  status: Type.String({ enum: [...CERT_STATUSES], description: 'EXPIRED once past not_after' }),
  wildcard: Type.Boolean({ description: 'It covers a wildcard domain of the install' }),
  auto_renew: Type.Boolean({ description: 'Always false: an imported certificate is renewed by importing' }),
  approved_time: DateTime(),
  expires_time: DateTime(),
  serial_number: Type.String({ description: 'Serial number, upper-case hex' }),
  subject: Type.String(),
  issuer: Type.String(),
  serial: Type.String({ description: 'Serial number, upper-case hex (same as serial_number)' }),
  fingerprint: Type.String({ description: 'SHA-256 fingerprint of the end-entity certificate' }),
  not_before: DateTime(),
  not_after: DateTime(),
  certificate: Type.String({ description: 'The stored chain, base64-encoded PEM' }),
  created_at: DateTime(),
});

/** getInstallCertificates: the platform's InstallSSLCertificatesResponse. */
export const CertificateList = Type.Object(
  {
    certificates: Type.Array(CertificateSchema),
    next_page_token: Type.Optional(
      Type.String({ description: 'The offset of the next page, when there is one (pass it as offset)' }),
    ),
  },
  { description: 'A page of certificates' },
);

/** getDomainCertificate: the platform's DomainCertificate (cert_info never holds the key: L2). */
export const DomainCertificateSchema = Type.Object({
  cert_name: Type.String({ description: 'The common name of the certificate' }),
  cert_info: Type.Object({ cert: Type.String({ description: 'The stored chain, base64-encoded PEM' }) }),
  certificate: CertificateSchema,
});

export const InstallCertificatesParams = Type.Object({ install_id: Uuid() });
export const DomainCertificateParams = Type.Object({ install_id: Uuid(), domain_id: Uuid() });
export const ListCertificatesQuery = PageQuery;

/** createDomainCertificateOrder: the reference's CertificateOrder (who holds the certificate). */
export const CertificateOrderBody = Type.Object({
  email_address: Type.String({ format: 'email', maxLength: 254 }),
  given_name: Type.String({ minLength: 1, maxLength: 100 }),
  family_name: Type.String({ minLength: 1, maxLength: 100 }),
  region_code: Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2 country code' }),
  state: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  city: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  phone: Type.Optional(Type.String({ minLength: 3, maxLength: 40, pattern: '^[0-9+().\\- ]+$' })),
});

/** Issue 22: what `POST /v1/installs/{id}/ssl_certificates/third_party?dry_run=true` answers (never the key). */
export const ImportCertificateDryRun = DryRunAnswer(
  {
    install_id: Uuid(),
    domains: Type.Array(Type.String(), { description: "The install's domains the certificate would cover" }),
    subject: Type.String(),
    issuer: Type.String(),
    serial: Type.String({ description: 'Serial number, upper-case hex' }),
    fingerprint: Type.String({ description: 'SHA-256 fingerprint of the end-entity certificate' }),
    not_before: DateTime(),
    not_after: DateTime(),
    replaces: Type.Array(Uuid(), {
      description: 'The certificates it would replace (their covered domains it covers too)',
    }),
    operation: Nullable(
      Type.Literal('apply_routing', {
        description: 'The operation the import would start: the web server serves the certificate',
      }),
    ),
  },
  {
    description: 'what the import would do',
    example: {
      install_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
      domains: ['example.com', 'www.example.com'],
      subject: 'CN=example.com',
      issuer: 'CN=Example CA',
      serial: '1A2B3C4D',
      fingerprint:
        'AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89',
      not_before: '2026-01-01T00:00:00.000Z',
      not_after: '2026-04-01T00:00:00.000Z',
      replaces: ['7e9f1a3b-5c7d-4e9f-8a1b-3c5d7e9f1a3b'],
      operation: 'apply_routing',
    },
  },
);
