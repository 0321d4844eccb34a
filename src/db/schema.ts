import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  boolean,
  foreignKey,
  index,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

// Columns are snake_case end to end (style rule 11), so a row projects straight into a response.
const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

export const accounts = pgTable('accounts', {
  id: uuid('id').primaryKey().defaultRandom(),
  name: text('name').notNull(),
  sites_enabled: boolean('sites_enabled').notNull().default(true),
  preferred_data_center: text('preferred_data_center'),
  plan: text('plan').notNull().default('standard'),
  created_at: createdAt(),
});

export const users = pgTable(
  'users',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    email: text('email').notNull(),
    first_name: text('first_name').notNull(),
    last_name: text('last_name').notNull(),
    phone: text('phone'),
    invite_accepted: boolean('invite_accepted').notNull().default(false),
    mfa_enabled: boolean('mfa_enabled').notNull().default(false),
    created_at: createdAt(),
  },
  (t) => [uniqueIndex('users_email_key').on(sql`lower(${t.email})`)],
);

/** A user's roles on one account (A1). `roles` is one of the five spec values. */
export const memberships = pgTable(
  'memberships',
  {
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    user_id: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    roles: text('roles').notNull(),
    created_at: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.account_id, t.user_id] }), index('memberships_user_id_idx').on(t.user_id)],
);

/** A2: the installs a partial member may see. Removed with the install. */
export const membershipInstalls = pgTable(
  'membership_installs',
  {
    account_id: uuid('account_id').notNull(),
    user_id: uuid('user_id').notNull(),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
  },
  (t) => [
    primaryKey({ columns: [t.account_id, t.user_id, t.install_id] }),
    foreignKey({
      name: 'membership_installs_membership_fk',
      columns: [t.account_id, t.user_id],
      foreignColumns: [memberships.account_id, memberships.user_id],
    }).onDelete('cascade'),
    index('membership_installs_install_id_idx').on(t.install_id),
  ],
);

/** API credentials for HTTP Basic auth; the password is stored as an scrypt hash only. */
export const credentials = pgTable(
  'credentials',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    user_id: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    username: text('username').notNull(),
    password_hash: text('password_hash').notNull(),
    created_at: createdAt(),
  },
  (t) => [
    uniqueIndex('credentials_username_key').on(t.username),
    index('credentials_user_id_idx').on(t.user_id),
  ],
);

export const sites = pgTable(
  'sites',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    group_name: text('group_name'),
    tags: text('tags').array().notNull().default(sql`'{}'::text[]`),
    sandbox: boolean('sandbox').notNull().default(false),
    transferable: boolean('transferable').notNull().default(true),
    created_at: createdAt(),
  },
  (t) => [index('sites_account_id_created_idx').on(t.account_id, t.created_at, t.id)],
);

export const installs = pgTable(
  'installs',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    site_id: uuid('site_id').references(() => sites.id, { onDelete: 'restrict' }),
    name: text('name').notNull(),
    environment: text('environment'),
    status: text('status').notNull().default('pending'),
    php_version: text('php_version'),
    wp_version: text('wp_version'),
    is_multisite: boolean('is_multisite').notNull().default(false),
    stable_ips: text('stable_ips').array(),
    primary_domain: text('primary_domain'),
    defer_wordpress_upgrades_until: timestamp('defer_wordpress_upgrades_until', {
      withTimezone: true,
      mode: 'date',
    }),
    created_at: createdAt(),
  },
  (t) => [
    // I2: install names are unique platform-wide (they form the cname).
    uniqueIndex('installs_name_key').on(t.name),
    // I4: one install per environment of a site.
    uniqueIndex('installs_site_environment_key')
      .on(t.site_id, t.environment)
      .where(sql`${t.site_id} is not null and ${t.environment} is not null`),
    index('installs_account_id_created_idx').on(t.account_id, t.created_at, t.id),
    index('installs_site_id_idx').on(t.site_id),
  ],
);

/** D7: the two ownership states of a domain. */
export const OWNERSHIP_STATUSES = ['TXT_VERIFICATION_PENDING', 'TXT_VERIFIED'] as const;

/** Domains of an install (D1-D7). `name` is ASCII (punycode), lower-case; `*.` marks a wildcard. */
export const domains = pgTable(
  'domains',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    primary: boolean('primary').notNull().default(false),
    secure_all_urls: boolean('secure_all_urls').notNull().default(false),
    // D5: the service refuses deleting a redirect target; set null is only the backstop.
    redirect_to_id: uuid('redirect_to_id').references((): AnyPgColumn => domains.id, {
      onDelete: 'set null',
    }),
    ownership_status: text('ownership_status', { enum: OWNERSHIP_STATUSES })
      .notNull()
      .default('TXT_VERIFICATION_PENDING'),
    txt_verification_key: text('txt_verification_key'),
    txt_verification_value: text('txt_verification_value'),
    txt_verified_time: timestamp('txt_verified_time', { withTimezone: true, mode: 'date' }),
    txt_verified_domain: text('txt_verified_domain'),
    created_at: createdAt(),
  },
  (t) => [
    uniqueIndex('domains_install_id_name_key').on(t.install_id, t.name),
    // D4: at most one primary domain per install.
    uniqueIndex('domains_one_primary_per_install_key').on(t.install_id).where(sql`${t.primary}`),
    // D3: a name is verified on at most one install platform-wide; unverified duplicates are allowed.
    uniqueIndex('domains_verified_name_key').on(t.name).where(sql`${t.ownership_status} = 'TXT_VERIFIED'`),
    index('domains_name_idx').on(t.name),
    index('domains_install_id_created_idx').on(t.install_id, t.created_at, t.id),
    index('domains_redirect_to_id_idx').on(t.redirect_to_id),
  ],
);

/**
 * Third-party certificates of an install (L1, L2). The chain is public and kept as PEM; the private
 * key is kept only AES-256-GCM sealed (see secrets.ts), never as PEM.
 */
export const certificates = pgTable(
  'certificates',
  {
    id: uuid('id').primaryKey(),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    chain_pem: text('chain_pem').notNull(),
    private_key_sealed: text('private_key_sealed').notNull(),
    subject: text('subject').notNull(),
    issuer: text('issuer').notNull(),
    serial: text('serial').notNull(),
    fingerprint: text('fingerprint').notNull(),
    not_before: timestamp('not_before', { withTimezone: true, mode: 'date' }).notNull(),
    not_after: timestamp('not_after', { withTimezone: true, mode: 'date' }).notNull(),
    created_at: createdAt(),
  },
  (t) => [index('certificates_install_id_created_idx').on(t.install_id, t.created_at, t.id)],
);

export const schema = {
  accounts,
  users,
  memberships,
  membershipInstalls,
  credentials,
  sites,
  installs,
  domains,
  certificates,
};
