import { Type } from 'typebox';
import { Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

const Scope = Type.Union([Type.Literal('read'), Type.Literal('operate'), Type.Literal('admin')], {
  description:
    '`read`: reads only; `operate`: reads plus backups, restores, copies, purges and the other install operations; `admin`: everything the maker may do but managing credentials',
});
const InstallIds = Nullable(
  Type.Array(Uuid(), {
    minItems: 1,
    maxItems: 100,
    description:
      'Only these installs (of the account, and visible to the maker); null: every install the maker sees',
  }),
);
const Cidrs = Nullable(
  Type.Array(Type.String({ minLength: 2, maxLength: 49 }), {
    minItems: 1,
    maxItems: 50,
    description: 'Client addresses allowed (IPv4 or IPv6 CIDRs or addresses); null: any address',
  }),
);

/** Issue 22: a scoped credential, without its secret. */
export const CredentialSchema = Type.Object(
  {
    id: Uuid(),
    account_id: Uuid(),
    user_id: Uuid({ description: 'The user who made it: it never grants more than this user may do' }),
    username: Type.String({ description: 'The Basic auth username: hpk_ and the id without dashes' }),
    description: Type.String(),
    scope: Scope,
    install_ids: InstallIds,
    allowed_cidrs: Cidrs,
    expires_at: Nullable(DateTime()),
    revoked_at: Nullable(DateTime()),
    last_used_at: Nullable(DateTime()),
    last_used_ip: Nullable(Type.String()),
    created_at: DateTime(),
  },
  {
    examples: [
      {
        id: '7b0f9c52-58b0-4a55-9c1e-5fb2b1f3d0a1',
        account_id: 'e2f0a3a4-1c5b-4a61-9d0c-5e1d0f3b2a10',
        user_id: '0f4c9e1d-2b3a-4c5d-8e6f-7a8b9c0d1e2f',
        username: 'hpk_7b0f9c5258b04a559c1e5fb2b1f3d0a1',
        description: 'CI backups',
        scope: 'operate',
        install_ids: ['3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f'],
        allowed_cidrs: ['203.0.113.0/24'],
        expires_at: '2027-01-01T00:00:00.000Z',
        revoked_at: null,
        last_used_at: null,
        last_used_ip: null,
        created_at: '2026-11-26T01:00:00.000Z',
      },
    ],
  },
);

export const CreatedCredentialSchema = Type.Object(
  {
    ...CredentialSchema.properties,
    password: Type.String({ description: 'The Basic auth password: shown this once, stored as a hash only' }),
  },
  { description: 'The new credential with its secret (shown once)' },
);

export const CredentialList = Paginated(CredentialSchema, 'A page of scoped credentials');

export const CreateCredentialBody = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 200 })),
    scope: Scope,
    install_ids: Type.Optional(InstallIds),
    expires_at: Type.Optional(Nullable(DateTime())),
    allowed_cidrs: Type.Optional(Cidrs),
  },
  {
    examples: [
      {
        description: 'CI backups',
        scope: 'operate',
        install_ids: ['3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f'],
        expires_at: '2027-01-01T00:00:00Z',
        allowed_cidrs: ['203.0.113.0/24'],
      },
    ],
  },
);

export const AccountParams = Type.Object({ account_id: Uuid() });
export const CredentialParams = Type.Object({ account_id: Uuid(), credential_id: Uuid() });
