import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  bigserial,
  boolean,
  check,
  customType,
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

/** A1: the five account roles (auth/access.ts says what each may do). */
export const ROLES = ['owner', 'full', 'full,billing', 'partial', 'partial,billing'] as const;
export type Role = (typeof ROLES)[number];
export const isRole = (value: string): value is Role => (ROLES as readonly string[]).includes(value);

/** A user's roles on one account (A1). `roles` is one of the five spec values (a CHECK since 0011). */
export const memberships = pgTable(
  'memberships',
  {
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    user_id: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    roles: text('roles').$type<Role>().notNull(),
    created_at: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.account_id, t.user_id] }),
    index('memberships_user_id_idx').on(t.user_id),
    check('memberships_roles_check', sql.raw(`roles in (${ROLES.map((r) => `'${r}'`).join(', ')})`)),
  ],
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
    /** Set while a site transfer with `maintenance_mode` runs on the install's site. */
    maintenance_mode: boolean('maintenance_mode').notNull().default(false),
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
    /** Issue 22: when `certificate.expiring` was written (once per certificate). */
    expiry_warned_at: timestamp('expiry_warned_at', { withTimezone: true, mode: 'date' }),
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
    /** Null for site-level work (a site transfer): then only the account's billing roles see it. */
    install_id: uuid('install_id').references(() => installs.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    status: text('status').notNull().default('queued'),
    resource_type: text('resource_type').notNull(),
    resource_id: uuid('resource_id').notNull(),
    input: jsonb('input').notNull().default({}),
    state: jsonb('state').notNull().default({}),
    error: text('error'),
    /**
     * Issue 21: what the finished work gave the caller (operation-types.ts RESULT): provisioning's
     * WordPress administrator (username, login URL). Null: nothing.
     */
    result: jsonb('result'),
    /**
     * Issue 21: a secret of the result shown once (provisioning's administrator password), sealed with
     * the secret box (context `operation-secret:<id>`); erased when the owner has read it.
     */
    secret_sealed: text('secret_sealed'),
    /**
     * Issue 30: why the open operation waits (its hosting server is silent), set and cleared by the
     * fleet's calls (modules/servers/servers.calls.service.ts); null: it does not wait on a server.
     */
    waiting_reason: text('waiting_reason'),
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

/**
 * Job leases (jobs/leases.ts): one row per running worker process, its heartbeat refreshed every few
 * seconds by the database's own clock (never the injected one: leases are real time). A row whose
 * heartbeat lapsed belongs to a dead worker: its claimed jobs are failed and retried at once.
 */
export const jobWorkers = pgTable('job_workers', {
  id: uuid('id').primaryKey(),
  host: text('host').notNull(),
  pid: integer('pid').notNull(),
  started_at: at('started_at').notNull().defaultNow(),
  heartbeat_at: at('heartbeat_at').notNull().defaultNow(),
});

/** Which worker runs which pg-boss job: written with the fetch, deleted with the completion or failure. */
export const jobClaims = pgTable(
  'job_claims',
  {
    job_id: uuid('job_id').primaryKey(),
    queue: text('queue').notNull(),
    worker_id: uuid('worker_id')
      .notNull()
      .references(() => jobWorkers.id),
    claimed_at: at('claimed_at').notNull().defaultNow(),
  },
  (t) => [index('job_claims_worker_idx').on(t.worker_id)],
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
    /** Holds a one-time secret (an invitation link): the bodies are erased once delivered. */
    sensitive: boolean('sensitive').notNull().default(false),
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

/**
 * Daily usage of an install (M5-M9); one row per install and day, metrics null when unknown.
 * Values are int64 and can exceed 2^53, so they travel as decimal strings (never a JS number).
 * No account_id here: a site transfer moves an install, and its history, by its installs row alone.
 */
const usageValue = customType<{ data: string; driverData: string }>({ dataType: () => 'bigint' });
export const installUsageDaily = pgTable(
  'install_usage_daily',
  {
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    date: date('date', { mode: 'string' }).notNull(),
    visit_count: usageValue('visit_count'),
    billable_visits: usageValue('billable_visits'),
    network_origin_bytes: usageValue('network_origin_bytes'),
    network_cdn_bytes: usageValue('network_cdn_bytes'),
    network_total_bytes: usageValue('network_total_bytes'),
    storage_file_bytes: usageValue('storage_file_bytes'),
    storage_database_bytes: usageValue('storage_database_bytes'),
    request_origin_count: usageValue('request_origin_count'),
  },
  (t) => [
    primaryKey({ columns: [t.install_id, t.date] }),
    // Account insights and summary read 31 days of 1,000 installs: with every metric in the index they
    // are 1,000 index-only range scans instead of a scan of the whole table (bench/README.md, "Usage").
    index('install_usage_daily_covering_idx').on(
      t.install_id,
      t.date,
      t.visit_count,
      t.billable_visits,
      t.network_origin_bytes,
      t.network_cdn_bytes,
      t.network_total_bytes,
      t.storage_file_bytes,
      t.storage_database_bytes,
      t.request_origin_count,
    ),
  ],
);

/**
 * Site report schedules (P1-P6). Keyed by site: the account is the site's, so a site transfer needs
 * no change here. `next_run_at` is the next_scheduled_date; its due_jobs row (key
 * `site-report:<id>`) makes the generation job run then.
 */
export const siteReportSchedules = pgTable(
  'site_report_schedules',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    site_id: uuid('site_id')
      .notNull()
      .references(() => sites.id, { onDelete: 'cascade' }),
    title: text('title').notNull(),
    template_uuid: uuid('template_uuid').notNull(),
    frequency_unit: text('frequency_unit', { enum: ['DAYS', 'MONTHLY'] }).notNull(),
    frequency_value: integer('frequency_value').notNull(),
    next_run_at: at('next_run_at').notNull(),
    recipients: jsonb('recipients').$type<{ name: string | null; email: string }[]>().notNull(),
    sections: jsonb('sections').$type<string[]>().notNull(),
    created_at: createdAt(),
    updated_at: at('updated_at').notNull().defaultNow(),
  },
  (t) => [index('site_report_schedules_site_id_created_idx').on(t.site_id, t.created_at, t.id)],
);

/**
 * Generated site reports: the HTML document itself, for the period [period_start, period_end).
 * One per schedule and period (the unique key), written with its outbox rows in one transaction.
 */
export const siteReports = pgTable(
  'site_reports',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    site_id: uuid('site_id')
      .notNull()
      .references(() => sites.id, { onDelete: 'cascade' }),
    schedule_id: uuid('schedule_id').references(() => siteReportSchedules.id, { onDelete: 'set null' }),
    title: text('title').notNull(),
    template_uuid: uuid('template_uuid').notNull(),
    period_start: at('period_start').notNull(),
    period_end: at('period_end').notNull(),
    recipients: jsonb('recipients').$type<{ name: string | null; email: string }[]>().notNull(),
    sections: jsonb('sections').$type<string[]>().notNull(),
    html: text('html').notNull(),
    created_at: createdAt(),
  },
  (t) => [
    uniqueIndex('site_reports_schedule_period_key').on(t.schedule_id, t.period_start, t.period_end),
    index('site_reports_site_id_created_idx').on(t.site_id, t.created_at, t.id),
  ],
);

/**
 * An operator's override of an account's limits (GET /v1/accounts/{id}/limits); without a row the
 * account's plan gives them (modules/usage/limits.ts). A null column means "no limit".
 */
export const accountLimits = pgTable('account_limits', {
  account_id: uuid('account_id')
    .primaryKey()
    .references(() => accounts.id, { onDelete: 'cascade' }),
  visitors: bigint('visitors', { mode: 'number' }),
  storage: bigint('storage', { mode: 'number' }),
  bandwidth: bigint('bandwidth', { mode: 'number' }),
  updated_at: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

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

// Site transfers (issue 11, T1-T11).

/** T9: a transfer is active while pending, scheduled or in_progress. */
export const ACTIVE_TRANSFER_STATUSES = ['pending', 'scheduled', 'in_progress'] as const;

/**
 * T1-T11: a site's move to another account. The names are snapshots taken at creation (T10); the
 * account ids stay as they were, so the origin keeps listing the transfers it initiated (T1).
 */
export const siteTransfers = pgTable(
  'site_transfers',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    site_id: uuid('site_id')
      .notNull()
      .references(() => sites.id, { onDelete: 'cascade' }),
    origin_account_id: uuid('origin_account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    destination_account_id: uuid('destination_account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    operation_id: uuid('operation_id').references(() => operations.id, { onDelete: 'set null' }),
    status: text('status').notNull(),
    site_name: text('site_name').notNull(),
    install_names: text('install_names').array().notNull(),
    origin_account_name: text('origin_account_name').notNull(),
    destination_account_name: text('destination_account_name').notNull(),
    scheduled_time: at('scheduled_time'),
    maintenance_mode: boolean('maintenance_mode').notNull().default(false),
    created_at: createdAt(),
    updated_at: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    // T7/T9: at most one active transfer per site, whatever the concurrency.
    uniqueIndex('site_transfers_one_active_key')
      .on(t.site_id)
      .where(sql`${t.status} in ('pending', 'scheduled', 'in_progress')`),
    index('site_transfers_site_id_created_idx').on(t.site_id, t.created_at, t.id),
    index('site_transfers_origin_created_idx').on(t.origin_account_id, t.created_at, t.id),
    index('site_transfers_destination_idx').on(t.destination_account_id),
    index('site_transfers_operation_id_idx').on(t.operation_id),
  ],
);

// --- Account users, invitations, SSH keys (issue 11: U1-U4, K1) ---

/**
 * An invitation to one membership (createAccountUser). Only a SHA-256 hash of the token is kept; the
 * token itself exists only in the e-mail. Single use (`accepted_at`), expires at `expires_at`.
 */
export const invitations = pgTable(
  'invitations',
  {
    account_id: uuid('account_id').notNull(),
    user_id: uuid('user_id').notNull(),
    token_hash: text('token_hash').notNull(),
    invited_by: uuid('invited_by').references(() => users.id, { onDelete: 'set null' }),
    expires_at: at('expires_at').notNull(),
    accepted_at: at('accepted_at'),
    created_at: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.account_id, t.user_id] }),
    foreignKey({
      name: 'invitations_membership_fk',
      columns: [t.account_id, t.user_id],
      foreignColumns: [memberships.account_id, memberships.user_id],
    }).onDelete('cascade'),
    uniqueIndex('invitations_token_hash_key').on(t.token_hash),
    index('invitations_user_id_idx').on(t.user_id),
    index('invitations_invited_by_idx').on(t.invited_by),
  ],
);

/** K1: a user's SSH public keys; a key (its fingerprint) is registered once platform-wide. */
export const sshKeys = pgTable(
  'ssh_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    user_id: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    key_type: text('key_type').notNull(),
    /** `type base64-blob`, without the comment. */
    public_key: text('public_key').notNull(),
    comment: text('comment').notNull().default(''),
    fingerprint: text('fingerprint').notNull(),
    created_at: createdAt(),
  },
  (t) => [
    uniqueIndex('ssh_keys_fingerprint_key').on(t.fingerprint),
    index('ssh_keys_user_id_created_idx').on(t.user_id, t.created_at, t.id),
  ],
);

/**
 * One row (id 1): bumped in every transaction that changes memberships or credentials, so each
 * process's credential cache notices the change within a second (auth/authenticator.ts).
 */
export const authEpoch = pgTable('auth_epoch', {
  id: integer('id').primaryKey(),
  epoch: bigint('epoch', { mode: 'number' }).notNull(),
});

/**
 * Issue 14: one row per account, bumped at commit of every transaction that changes the account's
 * data (deferred constraint triggers on the account-scoped tables, migration 0009). The read cache
 * (http/read-cache.ts) keeps a rendered GET body only while the versions it was rendered under hold.
 * No foreign key: a deleted account's row stays (its number must never repeat).
 */
export const accountDataVersions = pgTable('account_data_versions', {
  account_id: uuid('account_id').primaryKey(),
  version: bigint('version', { mode: 'number' }).notNull(),
});

// Issue 13: offload settings, domain status reports, the simulated certificate authority.

/** LargeFS offload settings of an install (getOffloadSettings); absent until first configured. */
export const offloadSettings = pgTable('offload_settings', {
  install_id: uuid('install_id')
    .primaryKey()
    .references(() => installs.id, { onDelete: 'cascade' }),
  largefs_settings: jsonb('largefs_settings').notNull(),
  updated_at: at('updated_at').notNull(),
});

/** checkStatus: one DNS check of a domain, run as a job; `result` is the DomainStatus once complete. */
export const domainReports = pgTable(
  'domain_reports',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    install_id: uuid('install_id')
      .notNull()
      .references(() => installs.id, { onDelete: 'cascade' }),
    domain_id: uuid('domain_id')
      .notNull()
      .references(() => domains.id, { onDelete: 'cascade' }),
    domain_name: text('domain_name').notNull(),
    result: jsonb('result'),
    created_at: at('created_at').notNull(),
    completed_at: at('completed_at'),
  },
  (t) => [
    index('domain_reports_install_id_created_idx').on(t.install_id, t.created_at),
    index('domain_reports_domain_id_idx').on(t.domain_id),
  ],
);

/** The simulated driver's certificate authority: made once, its key sealed (secrets.ts). */
export const simulatedCa = pgTable('simulated_ca', {
  id: text('id').primaryKey(),
  cert_pem: text('cert_pem').notNull(),
  key_sealed: text('key_sealed').notNull(),
  created_at: createdAt(),
});

// Issue 16: the local hosting driver (drivers/local/): its installs and its keyed work.

/**
 * An install the local driver hosts: its MariaDB account, the password sealed (secrets.ts, context
 * `local-install:<id>`). No foreign key: the row outlives the install until deprovisioning drops the
 * database, the user and the files.
 */
export const localInstalls = pgTable('local_installs', {
  install_id: uuid('install_id').primaryKey(),
  db_name: text('db_name').notNull(),
  db_user: text('db_user').notNull(),
  password_sealed: text('password_sealed').notNull(),
  /**
   * Issue 21: the WordPress administrator's password (sealed, context `local-wp-admin:<id>`), kept
   * only until the provisioning job has stored it with its operation (`forgetAdminPassword`).
   */
  admin_password_sealed: text('admin_password_sealed'),
  created_at: createdAt(),
});

/** The local driver's finished work: one row per idempotency key, written once the work is done. */
export const localTasks = pgTable(
  'local_tasks',
  {
    key: text('key').primaryKey(),
    operation: text('operation').notNull(),
    install_id: uuid('install_id'),
    result: jsonb('result').notNull(),
    completed_at: at('completed_at').notNull(),
  },
  (t) => [index('local_tasks_install_id_idx').on(t.install_id)],
);

// Issue 22: Idempotency-Key (http/idempotency.ts, modules/idempotency/).

/**
 * One Idempotency-Key of one caller (`scope`: the user id, or `admin`): claimed (`running`, with the
 * claimer's `token`) before the route runs, then holding the response to replay (`done`). A claim
 * whose `locked_at` is older than the lock timeout was left by a crashed process and may be taken
 * over; rows past `expires_at` are swept (docs/decisions.md).
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    /** SHA-256 (hex) of method, route, params, query and body in a canonical form. */
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<'running' | 'done'>().notNull(),
    token: uuid('token').notNull(),
    locked_at: at('locked_at'),
    response_status: integer('response_status'),
    response_headers: jsonb('response_headers').$type<Record<string, string>>(),
    response_body: text('response_body'),
    created_at: at('created_at').notNull(),
    expires_at: at('expires_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.scope, t.key] }),
    index('idempotency_keys_expires_at_idx').on(t.expires_at),
  ],
);

/**
 * Issue 22: scoped, expiring API credentials (HTTP Basic, username `hpk_<id without dashes>`). Made
 * by an owner for one account; the effective permission is the intersection of the maker's current
 * membership and the scope (auth/credentials.ts). The secret is stored as SHA-256 only (it is 256
 * random bits: docs/decisions.md #107). Revocation sets `revoked_at` and bumps the auth epoch.
 */
export const apiCredentials = pgTable(
  'api_credentials',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    user_id: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    description: text('description').notNull().default(''),
    scope: text('scope').$type<'read' | 'operate' | 'admin'>().notNull(),
    /** null: every install the maker sees; else only these (and still only those the maker sees). */
    install_ids: jsonb('install_ids').$type<string[]>(),
    /** null: any address; else the client address must fall in one of these CIDRs. */
    allowed_cidrs: jsonb('allowed_cidrs').$type<string[]>(),
    secret_hash: text('secret_hash').notNull(),
    expires_at: at('expires_at'),
    revoked_at: at('revoked_at'),
    last_used_at: at('last_used_at'),
    last_used_ip: text('last_used_ip'),
    created_at: createdAt(),
  },
  (t) => [
    index('api_credentials_account_id_idx').on(t.account_id, t.created_at, t.id),
    index('api_credentials_user_id_idx').on(t.user_id),
    check('api_credentials_scope_check', sql`scope in ('read', 'operate', 'admin')`),
  ],
);

/**
 * Issue 22: the audit log. One row per mutating call of the public or admin API, written before
 * the route runs (outcome null) and completed when it answers (http/audit.ts), so a crash in
 * between still leaves the attempt recorded (at least once). Kept 13 months (swept as due work).
 * No foreign keys: the log outlives what it names.
 */
export const auditEvents = pgTable(
  'audit_events',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    occurred_at: at('occurred_at').notNull(),
    account_id: uuid('account_id'),
    actor_type: text('actor_type').$type<'user' | 'admin'>().notNull(),
    actor_user_id: uuid('actor_user_id'),
    credential_id: uuid('credential_id'),
    ip: text('ip'),
    request_id: text('request_id').notNull(),
    operation_id: uuid('operation_id'),
    action: text('action').notNull(),
    method: text('method').notNull(),
    path: text('path').notNull(),
    resource_type: text('resource_type').notNull(),
    resource_id: text('resource_id'),
    status: integer('status'),
    before: jsonb('before').$type<Record<string, unknown> | null>(),
    after: jsonb('after').$type<Record<string, unknown> | null>(),
  },
  (t) => [
    index('audit_events_account_idx').on(t.account_id, t.occurred_at, t.id),
    index('audit_events_occurred_at_idx').on(t.occurred_at),
  ],
);

// Issue 22: events (30 days) and signed webhooks.

/**
 * A state change of an account's resources, written in the transaction that made it (never edited).
 * `seq` orders them (newest first in the list, per install for webhook deliveries). No foreign key to
 * the install or resource: an install.deleted event outlives its install.
 */
export const events = pgTable(
  'events',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    seq: bigserial('seq', { mode: 'number' }).notNull(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    install_id: uuid('install_id'),
    type: text('type').notNull(),
    resource_type: text('resource_type').notNull(),
    resource_id: text('resource_id').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    created_at: at('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('events_seq_key').on(t.seq),
    index('events_account_seq_idx').on(t.account_id, t.seq),
    index('events_created_at_idx').on(t.created_at),
  ],
);

/** A receiver of an account's events. `secret` (and the one it replaced, during its overlap) is sealed. */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    account_id: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description').notNull().default(''),
    /** Event types delivered; empty: every type. */
    event_types: jsonb('event_types').$type<string[]>().notNull(),
    enabled: boolean('enabled').notNull().default(true),
    secret: text('secret').notNull(),
    previous_secret: text('previous_secret'),
    previous_secret_expires_at: at('previous_secret_expires_at'),
    /** First failed attempt since the last success; 3 days of it disables the endpoint. */
    failing_since: at('failing_since'),
    disabled_reason: text('disabled_reason'),
    created_at: at('created_at').notNull(),
    updated_at: at('updated_at').notNull(),
  },
  (t) => [index('webhook_endpoints_account_idx').on(t.account_id, t.created_at, t.id)],
);

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
/**
 * Why an attempt failed: the URL was refused (SSRF guard), its name did not resolve, the connection
 * failed, the attempt timed out, or the answer was not a 2xx (a 3xx included: no redirects).
 */
export const WEBHOOK_ATTEMPT_ERROR_KINDS = [
  'refused',
  'dns',
  'connection',
  'timeout',
  'http_status',
] as const;

/**
 * One event for one endpoint. `lane` is what deliveries are ordered within (the install, or the
 * account's events without one): a delivery waits while an earlier one of its endpoint and lane is
 * pending. `payload` is the body as first signed, so every retry sends the same bytes.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    seq: bigserial('seq', { mode: 'number' }).notNull(),
    endpoint_id: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    account_id: uuid('account_id').notNull(),
    event_id: uuid('event_id').notNull(),
    event_type: text('event_type').notNull(),
    lane: text('lane').notNull(),
    payload: text('payload').notNull(),
    status: text('status').$type<(typeof WEBHOOK_DELIVERY_STATUSES)[number]>().notNull(),
    attempts: integer('attempts').notNull().default(0),
    next_attempt_at: at('next_attempt_at'),
    last_attempt_at: at('last_attempt_at'),
    last_status_code: integer('last_status_code'),
    last_latency_ms: integer('last_latency_ms'),
    last_error: text('last_error'),
    last_response: text('last_response'),
    delivered_at: at('delivered_at'),
    created_at: at('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_endpoint_event_key').on(t.endpoint_id, t.event_id),
    index('webhook_deliveries_lane_idx').on(t.endpoint_id, t.lane, t.seq),
    index('webhook_deliveries_endpoint_seq_idx').on(t.endpoint_id, t.seq),
    index('webhook_deliveries_status_idx').on(t.status, t.created_at),
  ],
);

/**
 * Issue 22: the delivery log, one row per HTTP attempt of a delivery (its number counts on across
 * redeliveries). Deleted with its delivery (the 30-day sweep, the endpoint's deletion).
 */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    delivery_id: uuid('delivery_id')
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
    attempt: integer('attempt').notNull(),
    started_at: at('started_at').notNull(),
    status_code: integer('status_code'),
    error_kind: text('error_kind').$type<(typeof WEBHOOK_ATTEMPT_ERROR_KINDS)[number]>(),
    error: text('error'),
    latency_ms: integer('latency_ms').notNull(),
    response_excerpt: text('response_excerpt'),
  },
  (t) => [uniqueIndex('webhook_attempts_delivery_attempt_key').on(t.delivery_id, t.attempt)],
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
  operations,
  backups,
  dueJobs,
  jobWorkers,
  jobClaims,
  mailOutbox,
  installUsageDaily,
  siteReportSchedules,
  siteReports,
  accountLimits,
  simulatedInstalls,
  simulatedTasks,
  simulatedFaults,
  siteTransfers,
  invitations,
  sshKeys,
  authEpoch,
  offloadSettings,
  domainReports,
  simulatedCa,
  localInstalls,
  localTasks,
  idempotencyKeys,
  events,
  webhookEndpoints,
  webhookDeliveries,
  webhookAttempts,
  apiCredentials,
  auditEvents,
};

// Issue 21: certificate orders through ACME (RFC 8555), the local driver's (drivers/local/acme.ts).

/**
 * The ACME account of one directory (ACME_DIRECTORY_URL): its key, made once and sealed (context:
 * `acme-account:<directory>`), and the account URL once registered.
 */
export const acmeAccounts = pgTable('acme_accounts', {
  directory_url: text('directory_url').primaryKey(),
  key_sealed: text('key_sealed').notNull(),
  account_url: text('account_url'),
  created_at: createdAt(),
});

/**
 * One certificate order of one driver call key: the certificate's key (sealed, context
 * `acme-order:<key>`), the ACME order URL (a retried call resumes it), and the chain once issued.
 */
export const acmeOrders = pgTable(
  'acme_orders',
  {
    key: text('key').primaryKey(),
    install_id: uuid('install_id').notNull(),
    directory_url: text('directory_url').notNull(),
    key_sealed: text('key_sealed').notNull(),
    order_url: text('order_url'),
    chain_pem: text('chain_pem'),
    created_at: createdAt(),
  },
  (t) => [index('acme_orders_install_id_idx').on(t.install_id)],
);

// Issue 30: a fleet of hosting servers (src/modules/servers, src/fleet).

/**
 * A hosting server whose agent runs the driver for the installs placed there. Its credentials are
 * stored as SHA-256 hashes only: the enrolment token (one use, expiring), the agent's credential and,
 * for a short grace after a rotation, the one before it.
 */
export const servers = pgTable(
  'servers',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    name: text('name').notNull(),
    /** `region` (the accounts' `preferred_data_center`), `plan`, any other: string to string. */
    labels: jsonb('labels').$type<Record<string, string>>().notNull().default({}),
    ipv4: text('ipv4').array().notNull().default(sql`'{}'::text[]`),
    ipv6: text('ipv6').array().notNull().default(sql`'{}'::text[]`),
    /** How many installs the server may hold (placement's free capacity). */
    capacity_installs: integer('capacity_installs').notNull(),
    /** `active`; `cordoned` and `draining` get no new installs (modules/servers/servers.schemas.ts). */
    state: text('state').notNull().default('active'),
    enrolment_hash: text('enrolment_hash'),
    enrolment_expires_at: timestamp('enrolment_expires_at', { withTimezone: true, mode: 'date' }),
    credential_hash: text('credential_hash'),
    previous_credential_hash: text('previous_credential_hash'),
    previous_valid_until: timestamp('previous_valid_until', { withTimezone: true, mode: 'date' }),
    agent_version: text('agent_version'),
    /** The agent process that fetched last: a new one gives the server's active jobs back. */
    agent_session: text('agent_session'),
    last_heartbeat_at: timestamp('last_heartbeat_at', { withTimezone: true, mode: 'date' }),
    /** The last heartbeat's capacity report (disk, memory, load, installs). */
    reported: jsonb('reported'),
    created_at: createdAt(),
  },
  (t) => [
    uniqueIndex('servers_name_key').on(t.name),
    index('servers_created_idx').on(t.created_at, t.id),
    check('servers_state_check', sql`${t.state} in ('active', 'cordoned', 'draining')`),
  ],
);

/**
 * Where an install is hosted (HOSTING_DRIVER=fleet): its server and the generation of that placement
 * (a move bumps it; calls of an older generation are refused). A server with installs cannot be deleted;
 * the placement goes when the install's deprovision call is done.
 */
export const installPlacements = pgTable(
  'install_placements',
  {
    /** No foreign key: the placement outlives the install row until its deprovision call is done. */
    install_id: uuid('install_id').primaryKey(),
    server_id: uuid('server_id')
      .notNull()
      .references(() => servers.id, { onDelete: 'restrict' }),
    generation: integer('generation').notNull().default(1),
    placed_at: timestamp('placed_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('install_placements_server_idx').on(t.server_id, t.install_id)],
);

/**
 * One driver call routed to a server's agent, by its `(method, key)`: the input and the result sealed
 * (secret box, context `fleet-call:<id>`), its state (`queued`, `done`, `failed`) and the pg-boss job
 * of its current ask.
 */
export const fleetCalls = pgTable(
  'fleet_calls',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    method: text('method').notNull(),
    key: text('key').notNull(),
    server_id: uuid('server_id')
      .notNull()
      .references(() => servers.id, { onDelete: 'cascade' }),
    install_id: uuid('install_id').notNull(),
    generation: integer('generation').notNull(),
    input_sealed: text('input_sealed').notNull(),
    state: text('state').notNull().default('queued'),
    result_sealed: text('result_sealed'),
    error: text('error'),
    final: boolean('final').notNull().default(false),
    /** Why the call waits (its server is silent), shown to whoever reads the call. */
    waiting_reason: text('waiting_reason'),
    job_id: uuid('job_id'),
    created_at: createdAt(),
    settled_at: timestamp('settled_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    uniqueIndex('fleet_calls_method_key_key').on(t.method, t.key),
    index('fleet_calls_server_state_idx').on(t.server_id, t.state),
    check('fleet_calls_state_check', sql`${t.state} in ('queued', 'done', 'failed')`),
  ],
);
