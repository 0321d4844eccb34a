import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

export const ENVIRONMENTS = ['production', 'staging', 'development'] as const;
export const Environment = Type.String({ enum: [...ENVIRONMENTS] });

const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: 'Site name' });
const GroupName = Nullable(Type.String({ minLength: 1, maxLength: 100 }));
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 50 }), { maxItems: 20, uniqueItems: true });

/** S3: the installs of a site as listed inside the Site record. */
export const SiteInstallSchema = Type.Object({
  id: Uuid(),
  name: Type.String(),
  environment: Nullable(Environment),
  cname: Type.String(),
  php_version: Nullable(Type.String()),
  is_multisite: Nullable(Type.Boolean()),
});

export const SiteSchema = Type.Object({
  id: Uuid(),
  name: Type.String(),
  account: Type.Object({ id: Uuid() }),
  group_name: Nullable(Type.String()),
  tags: Type.Array(Type.String()),
  created_at: DateTime(),
  sandbox: Type.Boolean(),
  transferable: Type.Boolean(),
  installs: Type.Array(SiteInstallSchema),
});

export const SiteList = Paginated(SiteSchema, 'A page of sites');
export const SiteParams = Type.Object({ site_id: Uuid() });
export const ListSitesQuery = Type.Object({
  ...PageQuery.properties,
  account_id: Type.Optional(Uuid({ description: 'Only the sites of this account' })),
});
export const CreateSiteBody = Type.Object({
  name: Name,
  account_id: Uuid(),
  group_name: Type.Optional(GroupName),
  tags: Type.Optional(Tags),
});
export const UpdateSiteBody = Type.Object({
  name: Type.Optional(Name),
  group_name: Type.Optional(GroupName),
  tags: Type.Optional(Tags),
});
