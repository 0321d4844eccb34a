import { type Static, type TSchema, Type } from 'typebox';
import type { Services } from '../services.js';

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

/** Every job of the service, in one place (G10 is reviewable here). */
export const JOBS = {
  /** I7: pending -> active. */
  'install-provision': operationStep,
  /** C1-C6. */
  'install-copy': operationStep,
  /** B1-B3. */
  'backup-create': operationStep,
  /** R1-R3: checkpoint backup, then the restore. */
  'backup-restore': operationStep,
  /**
   * M7-M8. Collapsing is done by the operations table (one open refresh per install, a partial
   * unique index), so the job itself is plain.
   */
  'disk-usage-refresh': operationStep,
  'cache-purge': { ...operationStep, retryLimit: 2 },
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
} as const satisfies Record<string, JobSpec>;

export type JobName = keyof typeof JOBS;
/** The jobs whose payload is `{ operation_id }`: the steps of an operation. */
export type OperationJobName = Exclude<JobName, 'mail-deliver'>;

/** The handler of every job, bound to the services (each lives in its module's *.jobs.ts). */
export function createJobHandlers(services: Services): Record<JobName, JobHandler<never>> {
  const { jobHandlers, outbox } = services;
  const handlers: { [N in JobName]: JobHandler<Static<(typeof JOBS)[N]['payload']>> } = {
    'install-provision': jobHandlers.installs.provision,
    'install-copy': jobHandlers.installs.copy,
    'backup-create': jobHandlers.backups.create,
    'backup-restore': jobHandlers.backups.restore,
    'disk-usage-refresh': jobHandlers.usage.refresh,
    'cache-purge': jobHandlers.cache.purge,
    'mail-deliver': {
      run: ({ message_id }) => outbox.deliver(message_id),
      exhausted: ({ message_id }, error) => outbox.giveUp(message_id, error),
    },
  };
  return handlers as Record<JobName, JobHandler<never>>;
}
