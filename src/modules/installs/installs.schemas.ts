import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { Environment } from '../sites/sites.schemas.js';

/** I1: the install name pattern (the name forms the cname). */
export const INSTALL_NAME_PATTERN = '^[a-z][a-z0-9]{2,13}$';
export const INSTALL_STATUSES = ['active', 'pending'] as const;

const installFields = {
  id: Uuid(),
  name: Type.String({ pattern: INSTALL_NAME_PATTERN }),
  account: Type.Object({ id: Uuid() }),
  php_version: Nullable(Type.String()),
  status: Type.String({ enum: [...INSTALL_STATUSES] }),
  site: Nullable(Type.Object({ id: Uuid() })),
  cname: Type.String(),
  stable_ips: Nullable(Type.Array(Type.String())),
  environment: Nullable(Environment),
  primary_domain: Nullable(Type.String()),
  is_multisite: Nullable(Type.Boolean()),
  created_at: DateTime(),
};

/** The Install record as listed. */
export const InstallSchema = Type.Object(installFields);

/** I8: wp_version and defer_wordpress_upgrades_until only when one install is requested. */
export const InstallDetailSchema = Type.Object({
  ...installFields,
  wp_version: Nullable(Type.String()),
  defer_wordpress_upgrades_until: Nullable(DateTime()),
  maintenance_mode: Type.Boolean({
    description: 'Hostplane extension: true while a site transfer with maintenance_mode moves the site',
  }),
});

export const InstallList = Paginated(InstallSchema, 'A page of installs');
export const InstallParams = Type.Object({ install_id: Uuid() });
export const ListInstallsQuery = Type.Object({
  ...PageQuery.properties,
  account_id: Type.Optional(Uuid({ description: 'Only the installs of this account' })),
});

export const CreateInstallBody = Type.Object({
  name: Type.String({
    pattern: INSTALL_NAME_PATTERN,
    maxLength: 14,
    description: 'Pattern ^[a-z][a-z0-9]{2,13}$',
  }),
  account_id: Uuid(),
  site_id: Type.Optional(Nullable(Uuid({ description: 'Required for accounts with sites enabled' }))),
  environment: Type.Optional(Nullable(Environment)),
});

export const UpdateInstallBody = Type.Object({
  site_id: Type.Optional(Uuid()),
  environment: Type.Optional(Nullable(Environment)),
});

/** Issue 22: what `DELETE /v1/installs/{id}?dry_run=true` answers. */
export const InstallDeleteDryRun = Type.Object(
  {
    dry_run: Type.Literal(true),
    install_id: Type.String({ format: 'uuid' }),
    operation: Type.Union([Type.String(), Type.Null()], {
      description: 'The job the deletion would start (the platform removes its copy)',
    }),
    domains_that_would_stop_serving: Type.Array(Type.String(), {
      description: "The install's cname and domains: they would stop serving",
    }),
  },
  {
    description: 'Dry run: what the deletion would do; nothing was changed',
    examples: [
      {
        dry_run: true,
        install_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
        operation: 'deprovision_install',
        domains_that_would_stop_serving: ['myinstall.hostplane.test', 'www.example.com'],
      },
    ],
  },
);
