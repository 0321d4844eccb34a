import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Uuid } from '../../http/schemas.js';

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

/** L2: what an imported certificate shows. Never the private key. */
export const CertificateSchema = Type.Object({
  id: Uuid(),
  install_id: Uuid(),
  domains: Type.Array(Type.String(), { description: "The install's domains the certificate covers" }),
  subject: Type.String(),
  issuer: Type.String(),
  serial: Type.String({ description: 'Serial number, upper-case hex' }),
  fingerprint: Type.String({ description: 'SHA-256 fingerprint of the end-entity certificate' }),
  not_before: DateTime(),
  not_after: DateTime(),
  certificate: Type.String({ description: 'The stored chain, base64-encoded PEM' }),
  created_at: DateTime(),
});

export const CertificateList = Paginated(CertificateSchema, 'A page of certificates');
export const InstallCertificatesParams = Type.Object({ install_id: Uuid() });
export const DomainCertificateParams = Type.Object({ install_id: Uuid(), domain_id: Uuid() });
export const ListCertificatesQuery = PageQuery;
