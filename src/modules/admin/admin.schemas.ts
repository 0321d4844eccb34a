import { Type } from 'typebox';
import { ROLES } from '../../auth/access.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { INSTALL_NAME_PATTERN, INSTALL_STATUSES } from '../installs/installs.schemas.js';
import { Environment } from '../sites/sites.schemas.js';

const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' });
const Email = Type.String({ format: 'email', maxLength: 254 });
const PersonName = Type.String({ minLength: 1, maxLength: 100 });

export const AdminAccountBody = Type.Object({
  id: Type.Optional(Uuid()),
  name: Name,
  sites_enabled: Type.Optional(Type.Boolean({ default: true })),
  preferred_data_center: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 50 }))),
  plan: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
});

export const AdminAccountSchema = Type.Object({
  id: Uuid(),
  name: Type.String(),
  sites_enabled: Type.Boolean(),
  preferred_data_center: Nullable(Type.String()),
  plan: Type.String(),
  created_at: DateTime(),
});

export const MembershipBody = Type.Object({
  account_id: Uuid(),
  roles: Type.String({ enum: [...ROLES] }),
  install_ids: Type.Optional(Type.Array(Uuid(), { maxItems: 1000 })),
});

export const AdminUserBody = Type.Object({
  email: Email,
  first_name: PersonName,
  last_name: PersonName,
  phone: Type.Optional(Nullable(Type.String({ maxLength: 40 }))),
  memberships: Type.Optional(Type.Array(MembershipBody, { maxItems: 100 })),
});

export const AdminUserSchema = Type.Object({
  id: Uuid(),
  email: Type.String(),
  first_name: Type.String(),
  last_name: Type.String(),
  phone: Nullable(Type.String()),
  mfa_enabled: Type.Boolean(),
  created_at: DateTime(),
  memberships: Type.Array(
    Type.Object({ account_id: Uuid(), roles: Type.String(), install_ids: Type.Array(Uuid()) }),
  ),
});

/** `mfa_enabled` is shown on account users; Hostplane has no MFA enrolment, so operators set it. */
export const AdminUserPatch = Type.Object({ mfa_enabled: Type.Optional(Type.Boolean()) });

export const CredentialSchema = Type.Object({
  username: Type.String(),
  password: Type.String({ description: 'Shown once; stored hashed' }),
});

export const AdminSiteBody = Type.Object({
  sandbox: Type.Optional(Type.Boolean()),
  transferable: Type.Optional(Type.Boolean()),
});

export const AdminInstallBody = Type.Object({
  status: Type.Optional(Type.String({ enum: [...INSTALL_STATUSES] })),
  wp_version: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 20 }))),
  stable_ips: Type.Optional(Nullable(Type.Array(Type.String({ format: 'ipv4' }), { maxItems: 10 }))),
});

/** `hostplane seed FILE.json`: a whole fixture, loaded in one transaction. */
export const SeedFixture = Type.Object({
  accounts: Type.Optional(Type.Array(AdminAccountBody, { maxItems: 10_000 })),
  sites: Type.Optional(
    Type.Array(
      Type.Object({
        id: Type.Optional(Uuid()),
        account_id: Uuid(),
        name: Name,
        group_name: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
        tags: Type.Optional(Type.Array(Type.String({ maxLength: 50 }), { maxItems: 20 })),
        sandbox: Type.Optional(Type.Boolean()),
        transferable: Type.Optional(Type.Boolean()),
      }),
      { maxItems: 100_000 },
    ),
  ),
  installs: Type.Optional(
    Type.Array(
      Type.Object({
        id: Type.Optional(Uuid()),
        account_id: Uuid(),
        site_id: Type.Optional(Nullable(Uuid())),
        name: Type.String({ pattern: INSTALL_NAME_PATTERN }),
        environment: Type.Optional(Nullable(Environment)),
        status: Type.Optional(Type.String({ enum: [...INSTALL_STATUSES] })),
        php_version: Type.Optional(Type.String({ maxLength: 20 })),
        wp_version: Type.Optional(Type.String({ maxLength: 20 })),
      }),
      { maxItems: 100_000 },
    ),
  ),
  users: Type.Optional(
    Type.Array(
      Type.Object({
        email: Email,
        first_name: PersonName,
        last_name: PersonName,
        memberships: Type.Optional(Type.Array(MembershipBody, { maxItems: 100 })),
        credentials: Type.Optional(
          Type.Array(
            Type.Object({
              username: Type.String({ minLength: 3, maxLength: 128, pattern: '^[A-Za-z0-9_.@-]+$' }),
              password: Type.String({ minLength: 12, maxLength: 256 }),
            }),
            { maxItems: 10 },
          ),
        ),
      }),
      { maxItems: 10_000 },
    ),
  ),
});
