import { type TSchema, Type } from 'typebox';
import { OWNERSHIP_STATUSES } from '../../db/schema.js';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';

/** Values of network_type (the spec lists them; new domains are on AN). */
export const NETWORK_TYPES = ['AN', 'GES', 'LEGACY'] as const;
/** network_info.status: ACTIVE once verified (D6: an unverified domain serves no traffic). */
export const NETWORK_STATUSES = ['ACTIVE', 'PENDING'] as const;
/** network_info.ssl.status: a certificate of the install covers the domain, has expired, or none does. */
export const SSL_STATUSES = ['active', 'expired', 'none'] as const;

/** Most domains a bulk create takes. */
export const MAX_BULK_DOMAINS = 50;

export const DomainSchema = Type.Object({
  id: Uuid(),
  name: Type.String({ description: 'ASCII (punycode), lower-case; `*.` marks a wildcard' }),
  duplicate: Type.Boolean({ description: 'The name is verified on another install (D3)' }),
  primary: Type.Boolean(),
  secure_all_urls: Type.Boolean({ description: 'Forces all URLs to HTTPS' }),
  network_type: Type.String({ enum: [...NETWORK_TYPES] }),
  network_details: Type.Object({
    dns_config_info: Type.Object({
      cname: Type.String({ description: 'CNAME value for a DNS CNAME record' }),
      a_records: Type.Array(Type.String(), { description: 'IP addresses usable for a DNS A record' }),
    }),
    network_info: Type.Object({
      status: Type.String({ enum: [...NETWORK_STATUSES] }),
      ssl: Type.Object({ status: Type.String({ enum: [...SSL_STATUSES] }) }),
    }),
  }),
  redirects_to: Type.Array(Type.Object({ id: Uuid(), name: Type.String() }), {
    description: 'The domain this one redirects to (at most one)',
  }),
  txt_verified_time: Nullable(DateTime()),
  // Not x-nullable in the platform's document: absent until verified, never null (issue 13).
  txt_verified_domain: Type.Optional(Type.String({ description: 'Absent until verified' })),
  txt_verification_key: Nullable(
    Type.String({ description: 'Name of the TXT record to create; null once verified' }),
  ),
  txt_verification_value: Nullable(
    Type.String({ description: 'Value of the TXT record to create; null once verified' }),
  ),
  ownership_status: Type.String({ enum: [...OWNERSHIP_STATUSES] }),
});

export const DomainList = Paginated(DomainSchema, 'A page of domains');
export const InstallDomainsParams = Type.Object({ install_id: Uuid() });
export const DomainParams = Type.Object({ install_id: Uuid(), domain_id: Uuid() });
export const ListDomainsQuery = PageQuery;

/** D5: the UUID of another domain of the install, or the literal `nil` to remove the redirect. */
const RedirectTo = Type.Union([Uuid(), Type.Literal('nil')], {
  description: 'UUID of another domain of the install, or "nil" for none',
});

const NewDomain = Type.Object({
  name: Type.String({
    minLength: 1,
    maxLength: 255,
    description: 'Domain name; an IDN is stored as punycode, `*.example.com` is a wildcard',
  }),
  primary: Type.Optional(Type.Boolean({ description: 'Make it the primary domain of the install' })),
  redirect_to: Type.Optional(RedirectTo),
});

export const CreateDomainBody = NewDomain;

export const CreateBulkDomainsBody = Type.Object({
  domains: Type.Array(NewDomain, { minItems: 1, maxItems: MAX_BULK_DOMAINS }),
});

export const BulkDomainsResponse = Type.Object(
  { domains: Type.Array(DomainSchema) },
  { description: 'The created domains, in request order' },
);

export const UpdateDomainBody = Type.Object({
  primary: Type.Optional(Type.Boolean({ description: 'Make primary on the install (D3, D4)' })),
  redirect_to: Type.Optional(RedirectTo),
  secure_all_urls: Type.Optional(Type.Boolean({ description: 'Force HTTPS' })),
});

const Change = <T extends TSchema>(value: T, description: string) =>
  Type.Object({ before: value, after: value }, { description });

/** Issue 22: what `PATCH /v1/installs/{id}/domains/{id}?dry_run=true` answers. */
export const UpdateDomainDryRun = DryRunAnswer(
  {
    install_id: Uuid(),
    domain_id: Uuid(),
    name: Type.String(),
    primary: Change(Type.Boolean(), 'Whether the domain is primary'),
    redirect_to: Change(Nullable(Uuid()), 'The domain it redirects to (null: none)'),
    secure_all_urls: Change(Type.Boolean(), 'Whether all URLs are forced to HTTPS'),
    primary_domain: Change(
      Nullable(Type.String()),
      "The install's primary domain (its cname when it has none)",
    ),
    operation: Nullable(
      Type.Literal('apply_routing', {
        description: 'The operation the change would start: the web server serves the new routing',
      }),
    ),
  },
  {
    description: 'what the change would do',
    example: {
      install_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
      domain_id: '7e9f1a3b-5c7d-4e9f-8a1b-3c5d7e9f1a3b',
      name: 'www.example.com',
      primary: { before: false, after: true },
      redirect_to: { before: null, after: null },
      secure_all_urls: { before: false, after: false },
      primary_domain: { before: 'example.com', after: 'www.example.com' },
      operation: 'apply_routing',
    },
  },
);
