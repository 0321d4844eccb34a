import type { EventEmitter } from 'node:events';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../../db/client.js';
import { isDatabaseUnavailable, sqlState } from '../../db/errors.js';
import { JOB_FINISHED, type JobFinished } from '../../jobs/worker.js';
import * as repo from './metrics.repo.js';

export interface MetricsDeps {
  /** Where the scrape-time gauges are read (queue depth, operations, outbox). */
  database: Database;
  /** The database handles of this process by pool name (`api`, `background`), for pool use. */
  pools: Readonly<Record<string, Database>>;
  /** Every queue of the catalog, so an empty queue still shows 0. */
  queueNames: readonly string[];
  /** How long the scrape-time queries may take before the scrape answers without them. */
  queryTimeoutMs?: number;
}

/** Why a database error happened: the database is out of reach, a statement failed, a pooled connection broke. */
export type DatabaseErrorKind = 'unavailable' | 'query' | 'connection';

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const JOB_SECONDS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600];

/** What a credential gate counted (auth/credentials.ts `stats()`). */
export interface CredentialCounts {
  refusedExpired: number;
  refusedAddress: number;
  usageFlushes: number;
  usageFlushFailures: number;
}

/** What an authenticator counted (auth/authenticator.ts `stats()`). */
export interface AuthCounts {
  hashes: number;
  refusedBusy: number;
  refusedFailures: number;
  abandoned: number;
  refreshes: number;
  mismatchesRemembered: number;
  running: number;
  waiting: number;
}

/** What the SSH gateway counted (modules/ssh-access `stats()`). */
export interface SshLoginCounts {
  accepted: number;
  refused: number;
  ended: number;
}

class QueryTimeout extends Error {}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new QueryTimeout(`metrics queries took over ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The Prometheus metrics of one process, in a registry of its own (never prom-client's global one:
 * tests build many apps in one process). Requests and jobs are counted as they end; queue depth,
 * operations and the outbox are read from the database when scraped, with a timeout.
 */
export function createMetrics({ database, pools, queueNames, queryTimeoutMs = 2000 }: MetricsDeps) {
  const registry = new Registry();
  const registers = [registry];
  // Process metrics, event-loop lag (nodejs_eventloop_lag_*) among them.
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'hostplane_http_requests_total',
    help: 'HTTP requests answered, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    registers,
  });
  const requestSeconds = new Histogram({
    name: 'hostplane_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: SECONDS,
    registers,
  });
  const jobs = new Counter({
    name: 'hostplane_jobs_total',
    help: 'Job attempts that ended, by kind (queue) and outcome (completed, failed, released)',
    labelNames: ['kind', 'outcome'],
    registers,
  });
  const jobSeconds = new Histogram({
    name: 'hostplane_job_duration_seconds',
    help: 'Run time of a job attempt, by kind (queue) and outcome',
    labelNames: ['kind', 'outcome'],
    buckets: JOB_SECONDS,
    registers,
  });
  const dbErrors = new Counter({
    name: 'hostplane_db_errors_total',
    help: 'Database errors: unavailable (out of reach), query (a statement failed), connection (a pooled connection broke)',
    labelNames: ['kind'],
    registers,
  });
  for (const kind of ['unavailable', 'query', 'connection'] satisfies DatabaseErrorKind[])
    dbErrors.inc({ kind }, 0);
  const idempotency = new Counter({
    name: 'hostplane_idempotency_requests_total',
    help: 'Requests with an Idempotency-Key answered without running: replayed (the stored response), mismatch (422, the key was used with another request), in_use (409, the first is still running)',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['replayed', 'mismatch', 'in_use']) idempotency.inc({ outcome }, 0);
  const auditEvents = new Counter({
    name: 'hostplane_audit_events_total',
    help: 'Mutating calls seen by the audit log: recorded (answered 2xx/3xx), discarded (an error answer or an Idempotency-Key replay: nothing changed), failed (the outcome could not be written; the attempt stays with a null status)',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['recorded', 'discarded', 'failed']) auditEvents.inc({ outcome }, 0);
  const scrapeErrors = new Counter({
    name: 'hostplane_metrics_query_errors_total',
    help: 'Scrapes whose database gauges could not be read (error or timeout); those gauges are then absent',
    registers,
  });

  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames, registers });
  const queueWaiting = gauge('hostplane_queue_waiting_jobs', 'Jobs ready to run and not yet taken', [
    'queue',
  ]);
  const queueActive = gauge('hostplane_queue_active_jobs', 'Jobs running now', ['queue']);
  const queueDeferred = gauge(
    'hostplane_queue_deferred_jobs',
    'Jobs waiting for a later start (retry back-off, scheduled)',
    ['queue'],
  );
  const queueOldest = gauge(
    'hostplane_queue_oldest_waiting_seconds',
    'Age of the oldest job ready to run and not yet taken',
    ['queue'],
  );
  const operations = gauge('hostplane_operations', 'Operations by type and status', ['type', 'status']);
  const outboxPending = gauge('hostplane_outbox_pending_messages', 'Mail messages not yet sent');
  const outboxOldest = gauge('hostplane_outbox_oldest_pending_seconds', 'Age of the oldest unsent message');
  const auditUnfinished = gauge(
    'hostplane_audit_events_unfinished',
    'Audit events older than a minute whose call never answered (status null: a process ended mid-call)',
  );
  const auditOldest = gauge(
    'hostplane_audit_oldest_event_seconds',
    'Age of the oldest audit event (kept 13 months: above ~34.3e6 s the sweep is behind)',
  );
  // Issue 22: the webhook queue (docs/operations.md, "Webhooks").
  const webhookDeliveries = gauge('hostplane_webhook_deliveries', 'Webhook deliveries by status', ['status']);
  const webhookAttempts = gauge(
    'hostplane_webhook_delivery_attempts',
    'Attempts made for the webhook deliveries of each status (kept 30 days)',
    ['status'],
  );
  const webhookOldest = gauge(
    'hostplane_webhook_oldest_pending_seconds',
    'Age of the oldest webhook delivery not yet delivered or given up',
  );
  const webhookDisabled = gauge(
    'hostplane_webhook_disabled_endpoints',
    'Webhook endpoints disabled (by their owners, or after 3 days of failures)',
  );
  const dbGauges = [
    webhookDeliveries,
    webhookAttempts,
    webhookOldest,
    webhookDisabled,
    queueWaiting,
    queueActive,
    queueDeferred,
    queueOldest,
    operations,
    outboxPending,
    outboxOldest,
    auditUnfinished,
    auditOldest,
  ];

  // Pool use, read from the pools themselves when scraped. PGlite is one in-process connection.
  new Gauge({
    name: 'hostplane_db_pool_connections',
    help: 'Database connections by pool and state (total, idle); PGlite: one connection, total only',
    labelNames: ['pool', 'state'],
    registers,
    collect() {
      this.reset();
      for (const [name, db] of Object.entries(pools)) {
        if (db.pool) {
          this.set({ pool: name, state: 'total' }, db.pool.totalCount);
          this.set({ pool: name, state: 'idle' }, db.pool.idleCount);
        } else {
          this.set({ pool: name, state: 'total' }, 1);
        }
      }
    },
  });
  new Gauge({
    name: 'hostplane_db_pool_waiting_requests',
    help: 'Queries waiting for a pooled connection (0 on PGlite, whose queries queue inside it)',
    labelNames: ['pool'],
    registers,
    collect() {
      this.reset();
      for (const [name, db] of Object.entries(pools)) this.set({ pool: name }, db.pool?.waitingCount ?? 0);
    },
  });

  // Issue 20: password hashing, read at scrape time from the authenticators this process serves.
  const authSources: (() => AuthCounts)[] = [];
  const authTotal = (field: keyof AuthCounts) => authSources.reduce((sum, read) => sum + read()[field], 0);
  /** A counter read from the sources at scrape time (each source only ever grows). */
  const sourcedCounter = (name: string, help: string, labelNames: string[], read: () => [object, number][]) =>
    new Counter({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const [labels, value] of read()) this.inc(labels, value);
      },
    });
  sourcedCounter(
    'hostplane_password_hashes_total',
    'scrypt password verifications started (sign-ins not answered from the credential cache)',
    [],
    () => [[{}, authTotal('hashes')]],
  );
  sourcedCounter(
    'hostplane_auth_refused_total',
    'Sign-ins refused before any hash: busy (hash queue full, 503), failures (too many failed sign-ins, 429), gone (the client left while it waited)',
    ['reason'],
    () => [
      [{ reason: 'busy' }, authTotal('refusedBusy')],
      [{ reason: 'failures' }, authTotal('refusedFailures')],
      [{ reason: 'gone' }, authTotal('abandoned')],
    ],
  );
  sourcedCounter(
    'hostplane_auth_mismatches_remembered_total',
    'Wrong passwords answered 401 without a hash: the same pair already failed against the same stored hash',
    [],
    () => [[{}, authTotal('mismatchesRemembered')]],
  );
  sourcedCounter(
    'hostplane_auth_refreshes_total',
    'Cached credentials re-checked in the background before they expire (refresh ahead, no hash)',
    [],
    () => [[{}, authTotal('refreshes')]],
  );
  new Gauge({
    name: 'hostplane_password_hash_slots',
    help: 'Password verifications running and waiting for a slot',
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'running' }, authTotal('running'));
      this.set({ state: 'waiting' }, authTotal('waiting'));
    },
  });

  // Issue 22: scoped credentials, read at scrape time from the gates this process serves.
  // Issue 31: SSH logins by result, and sessions ended because their access was revoked.
  const sshSources: (() => SshLoginCounts)[] = [];
  const sshTotal = (field: keyof SshLoginCounts) => sshSources.reduce((sum, read) => sum + read()[field], 0);
  sourcedCounter(
    'hostplane_ssh_logins_total',
    "Logins to Hostplane's sshd (issue 31) by result: accepted, or refused (a key that opens nothing there, an unknown login)",
    ['result'],
    () => [
      [{ result: 'accepted' }, sshTotal('accepted')],
      [{ result: 'refused' }, sshTotal('refused')],
    ],
  );
  sourcedCounter(
    'hostplane_ssh_sessions_ended_total',
    'Open SSH sessions ended because their key no longer opens their install (issue 31)',
    [],
    () => [[{}, sshTotal('ended')]],
  );
  const credentialSources: (() => CredentialCounts)[] = [];
  const credentialTotal = (field: keyof CredentialCounts) =>
    credentialSources.reduce((sum, read) => sum + read()[field], 0);
  sourcedCounter(
    'hostplane_scoped_credential_refused_total',
    'Requests with a scoped credential whose secret matched but that were refused (401): expired, or from an address outside its allow-list',
    ['reason'],
    () => [
      [{ reason: 'expired' }, credentialTotal('refusedExpired')],
      [{ reason: 'address' }, credentialTotal('refusedAddress')],
    ],
  );
  sourcedCounter(
    'hostplane_scoped_credential_usage_writes_total',
    "Write-behind batches of scoped credentials' last_used_at/last_used_ip: ok or failed",
    ['outcome'],
    () => [
      [{ outcome: 'ok' }, credentialTotal('usageFlushes')],
      [{ outcome: 'failed' }, credentialTotal('usageFlushFailures')],
    ],
  );

  /** Counts a database error (a no-op for anything else); answers whether it was one. */
  function databaseError(err: unknown): boolean {
    const kind = isDatabaseUnavailable(err) ? 'unavailable' : sqlState(err) ? 'query' : null;
    if (kind) dbErrors.inc({ kind });
    return kind !== null;
  }

  async function readDatabaseGauges() {
    const [queues, ops, outbox, audit, hooks] = await Promise.all([
      repo.queueStats(database.db),
      repo.operationCounts(database.db),
      repo.outboxBacklog(database.db),
      repo.auditBacklog(database.db),
      repo.webhookBacklog(database.db),
    ]);
    for (const g of dbGauges) g.reset();
    const byQueue = new Map(queues.map((q) => [q.queue, q]));
    for (const queue of new Set([...queueNames, ...byQueue.keys()])) {
      const q = byQueue.get(queue);
      queueWaiting.set({ queue }, q?.waiting ?? 0);
      queueActive.set({ queue }, q?.active ?? 0);
      queueDeferred.set({ queue }, q?.deferred ?? 0);
      queueOldest.set({ queue }, Number(q?.oldest_seconds ?? 0));
    }
    for (const o of ops) operations.set({ type: o.type, status: o.status }, o.n);
    outboxPending.set(outbox.pending);
    outboxOldest.set(Number(outbox.oldest_seconds));
    auditUnfinished.set(audit.unfinished);
    auditOldest.set(Number(audit.oldest_seconds));
    for (const status of ['pending', 'delivered', 'failed']) {
      const row = hooks.by_status.find((r) => r.status === status);
      webhookDeliveries.set({ status }, row?.deliveries ?? 0);
      webhookAttempts.set({ status }, row?.attempts ?? 0);
    }
    webhookOldest.set(hooks.oldest_pending_seconds);
    webhookDisabled.set(hooks.disabled_endpoints);
  }

  return {
    contentType: registry.contentType,

    /** The Prometheus text of this process (the database gauges are left out when they cannot be read). */
    async scrape(): Promise<string> {
      try {
        await withTimeout(readDatabaseGauges(), queryTimeoutMs);
      } catch (err) {
        for (const g of dbGauges) g.reset();
        scrapeErrors.inc();
        if (!(err instanceof QueryTimeout)) databaseError(err);
      }
      return registry.metrics();
    },

    /** One answered request; `route` is the route pattern (`/v1/sites/:site_id`), never the raw URL. */
    observeRequest(route: string, method: string, status: number, seconds: number) {
      const labels = { route, method, status: String(status) };
      requests.inc(labels);
      requestSeconds.observe(labels, seconds);
    },

    /** Counts the attempts a job runner ends (its JOB_FINISHED events), and their database errors. */
    observeJobs(events: EventEmitter) {
      events.on(JOB_FINISHED, ({ name, outcome, seconds, error }: JobFinished) => {
        jobs.inc({ kind: name, outcome });
        jobSeconds.observe({ kind: name, outcome }, seconds);
        if (error !== undefined) databaseError(error);
      });
    },

    /** Reports an authenticator's counters (its `stats`) in this registry. */
    observeAuth(stats: () => AuthCounts) {
      authSources.push(stats);
    },

    databaseError,
    /** Issue 22: a request with an Idempotency-Key that was replayed, refused (422) or in use (409). */
    idempotency: (outcome: 'replayed' | 'mismatch' | 'in_use') => idempotency.inc({ outcome }),
    /** Issue 22: what the audit hooks did with a mutating call. */
    audit: (outcome: 'recorded' | 'discarded' | 'failed') => auditEvents.inc({ outcome }),
    /** Issue 22: scoped credentials' refusals and last-use writes (auth/credentials.ts `stats`). */
    observeCredentials(stats: () => CredentialCounts) {
      credentialSources.push(stats);
    },
    /** Issue 31: the SSH gateway's counters (modules/ssh-access `stats`). */
    observeSsh(stats: () => SshLoginCounts) {
      sshSources.push(stats);
    },
    /** A pooled connection broke (the pool's error event). */
    connectionError: () => dbErrors.inc({ kind: 'connection' }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
