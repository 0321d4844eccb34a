import { type Static, type TSchema, Type } from 'typebox';

/** What a handler knows about the attempt it runs. */
export interface JobContext {
  jobId: string;
  /** 1 on the first attempt. */
  attempt: number;
  /** True when a failure of this attempt is not retried. */
  lastAttempt: boolean;
  /** Aborted when the job's expiry passes, or when a draining worker releases it. */
  signal: AbortSignal;
}

/**
 * A job's code. `run` must be idempotent: after a crash, an expiry or a duplicate it runs again and
 * must not do the work twice (handlers move the resource's own status and check it first).
 * `exhausted` runs once the retries are used up (or the last attempt expired): it makes the failure
 * visible (the operation fails, the resource is aborted, the failure mail goes out).
 */
export interface JobHandler<P> {
  run(payload: P, ctx: JobContext): Promise<void>;
  exhausted(payload: P, error: string): Promise<void>;
}

/** How pg-boss keeps one kind of job; stored on its queue at start (JOB_* settings can override). */
export interface JobSpec<P extends TSchema = TSchema> {
  payload: P;
  /** Retries after the first attempt. */
  retryLimit: number;
  /** Seconds before the first retry; doubled per attempt (with jitter) when `retryBackoff`. */
  retryDelaySeconds: number;
  retryBackoff: boolean;
  /**
   * Seconds an attempt may run; past it the attempt fails (a dead worker's job is retried after
   * it). Set to the worst case of one step: long waits are due work, not a running job.
   */
  expireInSeconds: number;
  /** Jobs of this kind one worker process runs at once. */
  concurrency: number;
  /** pg-boss queue policy; default `standard`. */
  policy?: 'standard' | 'short' | 'singleton' | 'stately';
  /** With `policy`: the key that deduplicates (method syntax: specs of any payload share one record type). */
  singletonKey?(payload: Static<P>): string;
}

const OperationPayload = Type.Object({ operation_id: Type.String({ format: 'uuid' }) });

/**
 * A step of an operation: one driver call (start it, or ask whether it is done) and one transaction.
 * Waiting for the platform is due work (jobs/due.ts), so an attempt is short: 5 minutes is a hung
 * call. Retries back off from 10 s: 10-20 s, 20-40 s, 40-80 s. Policy `short` keyed by the
 * operation: at most one queued step per operation (a second send while one waits is dropped; the
 * waiting one does the work). Handlers are idempotent anyway; this keeps duplicates out of the queue.
 */
const operationStep = {
  payload: OperationPayload,
  retryLimit: 3,
  retryDelaySeconds: 10,
  retryBackoff: true,
  expireInSeconds: 300,
  concurrency: 4,
  policy: 'short',
  singletonKey: (payload: { operation_id: string }) => payload.operation_id,
} satisfies JobSpec<typeof OperationPayload>;

/**
 * A short job started by due work (jobs/due.ts) when its time comes: a minute per attempt, retried
 * from 30 s (doubling) three times; policy `short` keyed by what it is about (one queued at a time).
 */
const dueWork = {
  retryLimit: 3,
  retryDelaySeconds: 30,
  retryBackoff: true,
  expireInSeconds: 60,
  policy: 'short',
} as const;

/**
 * Every job of the service, in one place (G10 is reviewable here). The step job of an operation has
 * the name of its operation type (modules/operations/operation-types.ts), so one word names both.
 * The handlers live in each module's *.jobs.ts; the composition root (services.ts) maps names to them.
 */
export const JOBS = {
  /** I7: pending -> active. */
  provision_install: operationStep,
  /** C1-C6. */
  copy_install: operationStep,
  /** B1-B3. */
  create_backup: operationStep,
  /** R1-R3: checkpoint backup, then the restore. */
  restore_backup: operationStep,
  /**
   * M7-M8. Collapsing is done by the operations table (one open refresh per install, a partial
   * unique index), so the job itself is plain.
   */
  refresh_disk_usage: operationStep,
  purge_cache: { ...operationStep, retryLimit: 2 },
  /** Issue 30: an install's move to another server (each step a keyed fleet call; rolls back on failure). */
  move_install: operationStep,
  /** Issue 13: createDomainCertificateOrder, fulfilled by the driver's CA. */
  order_certificate: operationStep,
  /**
   * Issue 21: an install's routing (domains, redirects, certificates) applied by the driver. Coalesced
   * by the operations table (a change while one is queued joins it: operations.startCoalesced).
   */
  apply_routing: operationStep,
  /**
   * Issue 21: a certificate ordered through ACME is ordered again before it expires. Due work
   * (jobs/due.ts, one row per install and domain) made when the order completes; when due it starts
   * a new order_certificate operation with the completed order's input. Keyed by that order.
   */
  renew_certificate: {
    payload: Type.Object({ order_id: Type.String({ format: 'uuid' }) }),
    ...dueWork,
    concurrency: 1,
    singletonKey: (payload: { order_id: string }) => payload.order_id,
  },
  /**
   * Issue 22: a certificate entering its expiry warning window (14 days before not_after) writes
   * `certificate.expiring`. Due work made when the certificate is stored; once per certificate.
   */
  'certificate-expiring': {
    payload: Type.Object({ certificate_id: Type.String({ format: 'uuid' }) }),
    ...dueWork,
    concurrency: 2,
    singletonKey: (payload: { certificate_id: string }) => payload.certificate_id,
  },
  /**
   * D7 in the background (decision 249): a pending domain's TXT record looked up again, with a
   * back-off, for a week after it was added. Due work (one row per domain) made when the domain is
   * added and again after each check that found it pending; keyed by the domain.
   */
  verify_domain: {
    payload: Type.Object({
      install_id: Type.String({ format: 'uuid' }),
      domain_id: Type.String({ format: 'uuid' }),
      /** When the domain was added, by the service's clock: the week of checks counts from it. */
      added_at: Type.String({ format: 'date-time' }),
    }),
    ...dueWork,
    concurrency: 2,
    singletonKey: (payload: { domain_id: string }) => payload.domain_id,
  },
  /** T9-T11: in_progress, the driver's move_site, then the move in one transaction. */
  transfer_site: operationStep,
  /**
   * Issue 16: after an install is deleted, the driver removes its files, database and backups. Keyed
   * by the install (the row is gone: no operation); retried like a step, then left to the operator.
   */
  deprovision_install: {
    payload: Type.Object({ install_id: Type.String({ format: 'uuid' }) }),
    retryLimit: 5,
    retryDelaySeconds: 10,
    retryBackoff: true,
    expireInSeconds: 300,
    concurrency: 2,
    policy: 'short',
    singletonKey: (payload: { install_id: string }) => payload.install_id,
  },
  /**
   * C6, B3, R3: one job per outbox message, sent in the transaction that ends the operation. SMTP
   * servers refuse for minutes at a time: 30 s, then doubling, over five retries (~15 min).
   */
  'mail-deliver': {
    payload: Type.Object({ message_id: Type.String({ format: 'uuid' }) }),
    retryLimit: 5,
    retryDelaySeconds: 30,
    retryBackoff: true,
    expireInSeconds: 120,
    concurrency: 2,
    policy: 'short',
    singletonKey: (payload: { message_id: string }) => payload.message_id,
  },
  /**
   * Site reports: a due schedule's report (modules/reports). One queued run per schedule; the
   * report row and its outbox rows commit together, so a retry never queues a second message.
   */
  'site-report-generate': {
    payload: Type.Object({ schedule_id: Type.String({ format: 'uuid' }) }),
    retryLimit: 3,
    retryDelaySeconds: 30,
    retryBackoff: true,
    expireInSeconds: 120,
    concurrency: 1,
    policy: 'short',
    singletonKey: (payload: { schedule_id: string }) => payload.schedule_id,
  },
  /**
   * Issue 13, checkStatus: the DNS lookups of one report. A failed lookup is retried twice after
   * 5-10 s; then the report completes with dns_error.
   */
  'domain-status-check': {
    payload: Type.Object({ report_id: Type.String({ format: 'uuid' }) }),
    retryLimit: 2,
    retryDelaySeconds: 5,
    retryBackoff: true,
    expireInSeconds: 60,
    concurrency: 2,
  },
  /**
   * Issue 22: one attempt at one webhook delivery. An HTTP failure is not a job failure: the handler
   * records it and writes the next attempt as due work (back-off over 3 days). The job's own retries
   * cover a crash or a database error mid-attempt (a SIGKILLed worker's job is retried at once).
   */
  'webhook-deliver': {
    payload: Type.Object({ delivery_id: Type.String({ format: 'uuid' }) }),
    retryLimit: 5,
    retryDelaySeconds: 5,
    retryBackoff: true,
    expireInSeconds: 120,
    concurrency: 8,
    policy: 'short',
    singletonKey: (payload: { delivery_id: string }) => payload.delivery_id,
  },
  /**
   * Issue 21, usage from the server: the driver's access logs rolled into the daily usage rows, then
   * the next roll-up scheduled as due work. One queued at a time; a failed roll-up is simply retried
   * (the figures it stores are a day's totals, so storing them twice is harmless).
   */
  'usage-traffic-roll': {
    payload: Type.Object({}),
    retryLimit: 2,
    retryDelaySeconds: 30,
    retryBackoff: true,
    expireInSeconds: 300,
    concurrency: 1,
    policy: 'short',
    singletonKey: () => 'traffic',
  },
} as const satisfies Record<string, JobSpec>;

export type JobName = keyof typeof JOBS;
export type JobPayload<N extends JobName> = Static<(typeof JOBS)[N]['payload']>;
/** The jobs whose payload is `{ operation_id }`: the steps of an operation. */
export type OperationJobName = {
  [N in JobName]: (typeof JOBS)[N]['payload'] extends typeof OperationPayload ? N : never;
}[JobName];

/** The handler of every job (the worker's map, built by the composition root). */
export type JobHandlers = { [N in JobName]: JobHandler<JobPayload<N>> };
