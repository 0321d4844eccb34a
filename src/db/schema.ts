import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  boolean,
  date,
  foreignKey,
  index,
  integer,
  jsonb,
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

const at = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const bytes = (name: string) => bigint(name, { mode: 'number' });

/**
 * Every asynchronous request (a Hostplane extension, GET /v1/operations/{id}). `status` is the
 * client-visible state; `state` is the handler's private progress (checkpoint id, results).
 */
export const operations = pgTable(
  'operations',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    status: text('status').notNull().default('queued'),
    resource_type: text('resource_type').notNull(),
    resource_id: uuid('resource_id').notNull(),
    input: jsonb('input').notNull().default({}),
    state: jsonb('state').notNull().default({}),
    error: text('error'),
    expected_at: at('expected_at'),
    created_at: createdAt(),
    started_at: at('started_at'),
    completed_at: at('completed_at'),
  },
  (t) => [
    index('operations_install_id_created_idx').on(t.install_id, t.created_at, t.id),
    index('operations_account_id_idx').on(t.account_id),
    index('operations_resource_id_idx').on(t.resource_id),
    // M8: one pending disk-usage recalculation per install; concurrent requests collapse onto it.
    uniqueIndex('operations_one_open_disk_refresh_key')
      .on(t.install_id)
      .where(sql`${t.type} = 'refresh_disk_usage' and ${t.status} in ('queued', 'in_progress')`),
    // One restore at a time per install.
    uniqueIndex('operations_one_open_restore_key')
      .on(t.install_id)
      .where(sql`${t.type} = 'restore_backup' and ${t.status} in ('queued', 'in_progress')`),
  ],
);

/** B1-B2: backups of an install; `kind` checkpoint marks those taken before a restore (R2). */
export const backups = pgTable(
  'backups',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    operation_id: uuid('operation_id').references(() => operations.id, { onDelete: 'set null' }),
    kind: text('kind').notNull().default('manual'),
    status: text('status').notNull().default('requested'),
    description: text('description').notNull(),
    wordpress_version: text('wordpress_version'),
    size_bytes: bytes('size_bytes'),
    snapshot: jsonb('snapshot'),
    create_time: at('create_time').notNull().defaultNow(),
    complete_time: at('complete_time'),
  },
  (t) => [
    index('backups_install_id_created_idx').on(t.install_id, t.create_time, t.id),
    index('backups_account_id_idx').on(t.account_id),
    index('backups_operation_id_idx').on(t.operation_id),
  ],
);

/**
 * Due work: a job to enqueue at `run_at` (by the injected clock). The sweeper moves due rows into the
 * queue, so a manual clock move and a restart after a crash are handled the same way.
 */
export const dueJobs = pgTable(
  'due_jobs',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    /** Deduplicates: one due row per key (an operation's next step). */
    key: text('key').notNull(),
    name: text('name').notNull(),
    payload: jsonb('payload').notNull(),
    run_at: at('run_at').notNull(),
    created_at: createdAt(),
  },
  (t) => [uniqueIndex('due_jobs_key_key').on(t.key), index('due_jobs_run_at_idx').on(t.run_at)],
);

/** Outgoing mail (C6, B3, R3): one row per message; a job delivers it, or it is kept when no SMTP. */
export const mailOutbox = pgTable(
  'mail_outbox',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    operation_id: uuid('operation_id').references(() => operations.id, { onDelete: 'set null' }),
    event: text('event').notNull(),
    to_address: text('to_address').notNull(),
    subject: text('subject').notNull(),
    text_body: text('text_body').notNull(),
    html_body: text('html_body').notNull(),
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    last_error: text('last_error'),
    created_at: createdAt(),
    sent_at: at('sent_at'),
  },
  (t) => [
    // One message per operation, event and address, however often the completion is retried.
    uniqueIndex('mail_outbox_operation_event_to_key').on(t.operation_id, t.event, t.to_address),
    index('mail_outbox_created_idx').on(t.created_at, t.id),
  ],
);

/** Daily usage of an install (M5-M9); one row per install and day, metrics null when unknown. */
export const installUsageDaily = pgTable(
  'install_usage_daily',
  {
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    date: date('date', { mode: 'string' }).notNull(),
    visit_count: bytes('visit_count'),
    billable_visits: bytes('billable_visits'),
    network_origin_bytes: bytes('network_origin_bytes'),
    network_cdn_bytes: bytes('network_cdn_bytes'),
    network_total_bytes: bytes('network_total_bytes'),
    storage_file_bytes: bytes('storage_file_bytes'),
    storage_database_bytes: bytes('storage_database_bytes'),
    request_origin_count: bytes('request_origin_count'),
  },
  (t) => [primaryKey({ columns: [t.install_id, t.date] })],
);

/** The simulated driver's platform: what each install holds (files, tables, WordPress version). */
export const simulatedInstalls = pgTable('simulated_installs', {
  install_id: uuid('install_id')
    .primaryKey()
    .references(() => installs.id, { onDelete: 'cascade' }),
  wp_version: text('wp_version'),
  file_bytes: bytes('file_bytes').notNull(),
  db_tables: jsonb('db_tables').$type<Record<string, number>>().notNull(),
  updated_at: at('updated_at').notNull().defaultNow(),
});

/** The simulated driver's work: one row per idempotency key, applied once when ready. */
export const simulatedTasks = pgTable(
  'simulated_tasks',
  {
    key: text('key').primaryKey(),
    operation: text('operation').notNull(),
    install_id: uuid('install_id'),
    ready_at: at('ready_at').notNull(),
    applied_at: at('applied_at'),
    result: jsonb('result'),
    created_at: createdAt(),
  },
  (t) => [index('simulated_tasks_install_id_idx').on(t.install_id)],
);

/** POST /admin/v1/faults: the next `remaining` calls of `operation` fail or hang (test mode). */
export const simulatedFaults = pgTable('simulated_faults', {
  operation: text('operation').primaryKey(),
  mode: text('mode').notNull(),
  remaining: integer('remaining').notNull(),
  created_at: createdAt(),
});

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
  operations,
  backups,
  dueJobs,
  mailOutbox,
  installUsageDaily,
  simulatedInstalls,
  simulatedTasks,
  simulatedFaults,
};
