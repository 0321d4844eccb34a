import { EventEmitter } from 'node:events';
import type { JobsConfig } from '../config.js';
import { isDatabaseUnavailable } from '../db/errors.js';
import type { JobContext, JobHandler } from './catalog.js';
import { createLease } from './leases.js';
import { createOutage, type Outage } from './outage.js';
import { type JobQueue, jobOfQueue, type QueuedJob } from './queue.js';

/** The subset of pino's logger the job engine uses. */
export interface JobLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface RunnerDeps {
  queue: Pick<JobQueue, 'fetch' | 'complete' | 'fail' | 'release' | 'queueNames'>;
  /** One handler per job name (`JobHandlers`, built by the composition root: services.ts). */
  handlers: Readonly<Record<string, JobHandler<never>>>;
  /** Enqueues due work (jobs/due.ts) and answers how many jobs it enqueued. */
  sweep: () => Promise<number>;
  log: JobLog;
  /** Worker processes: the lease their jobs are claimed under (jobs/leases.ts). */
  workerId?: () => string;
  /** Where database errors of background work are reported (one log line per outage). */
  outage?: Outage;
}

/** Emitted with `{ name, id }` when a handler starts (bench/, diagnostics). */
export const JOB_STARTED = 'job-started';
/** Emitted with a {@link JobFinished} when an attempt ends, once its end is recorded (metrics). */
export const JOB_FINISHED = 'job-finished';

/**
 * How an attempt ended: `completed`; `failed` (the handler threw or exceeded its expiry: retried
 * after its back-off, or dead-lettered); `released` (a drain or a lost lease gave it back untried).
 */
export type JobOutcome = 'completed' | 'failed' | 'released';
export interface JobFinished {
  /** The queue: the job's name, or `<name>-exhausted` for its dead-letter handler. */
  name: string;
  id: string;
  outcome: JobOutcome;
  seconds: number;
  /** What a `failed` attempt threw (metrics count database errors among them). */
  error?: unknown;
}

class JobAborted extends Error {}
/** A job given back without blaming it (a drain's timeout, a lost lease): retried at once, no retry spent. */
class JobReleased extends JobAborted {}

function errorMessage(output: unknown): string {
  const o = output as { message?: unknown; value?: { message?: unknown } } | null;
  const message = o?.message ?? o?.value?.message;
  return typeof message === 'string' ? message : 'the job failed';
}

/** Rejects when the signal aborts: a handler that ignores its signal still loses the race. */
function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    const fail = () => reject(signal.reason instanceof Error ? signal.reason : new JobAborted('aborted'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

/** Runs fetched jobs: the one code path shared by workers and by tests' `runJobs()`. */
export function createJobRunner({ queue, handlers, sweep, log, workerId, outage }: RunnerDeps) {
  const events = new EventEmitter();
  /** Jobs running in this process, so a shutdown can release what did not finish. */
  const running = new Map<string, { name: string; controller: AbortController; done: Promise<void> }>();

  async function execute(queueName: string, job: QueuedJob, controller: AbortController) {
    const { name, exhausted: dead } = jobOfQueue(queueName);
    const handler = handlers[name];
    if (!handler) throw new Error(`no handler for job ${name}`);
    events.emit(JOB_STARTED, { name: queueName, id: job.id });
    if (dead) {
      await handler.exhausted(job.data as never, errorMessage(job.output));
      return;
    }
    const ctx: JobContext = {
      jobId: job.id,
      attempt: job.retryCount + 1,
      lastAttempt: job.retryCount >= job.retryLimit,
      signal: controller.signal,
    };
    try {
      await handler.run(job.data as never, ctx);
    } catch (err) {
      // A failure the handler marks final (a DriverError a retry cannot change: issue 29 defect 2)
      // spends no retry: the job ends now through its dead-letter handler, with its reason.
      if (!(err instanceof Error && (err as { final?: unknown }).final === true) || controller.signal.aborted)
        throw err;
      log.warn({ err, job: job.id, queue: queueName }, 'job failed for good: no retry can change it');
      await handler.exhausted(job.data as never, err.message);
    }
  }

  /**
   * Records the end of a job. While the database is unreachable it is retried with back-off (up to
   * ~1.5 min), so an outage does not leave a finished job active until its expiry; a job whose claim
   * was reaped meanwhile is not touched (its retry belongs to another worker now).
   */
  async function settle(job: QueuedJob, queueName: string, record: () => Promise<boolean>) {
    for (let attempt = 1; ; attempt++) {
      try {
        if (!(await record())) {
          log.warn(
            { job: job.id, queue: queueName },
            'job handed to another worker meanwhile; this result is dropped',
          );
        }
        outage?.ok('job');
        return;
      } catch (err) {
        if (!isDatabaseUnavailable(err) || attempt >= 20) {
          // The job stays active; its lease or pg-boss's expiry retries it (the same as a crash).
          log.error({ err, job: job.id, queue: queueName }, 'could not record the end of a job');
          return;
        }
        const delay = outage ? outage.failed('job', err) : 1000;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Runs one job to completion or failure; its expiry aborts it (a hung call gives up). */
  async function runJob(queueName: string, job: QueuedJob): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new JobAborted(`the job exceeded its ${job.expireInSeconds} s expiry`)),
      Math.max(1, job.expireInSeconds) * 1000,
    );
    const owner = workerId?.();
    const startedAt = performance.now();
    const finished = (outcome: JobOutcome, error?: unknown) => {
      const seconds = (performance.now() - startedAt) / 1000;
      const ended: JobFinished = {
        name: queueName,
        id: job.id,
        outcome,
        seconds,
        ...(error !== undefined && { error }),
      };
      events.emit(JOB_FINISHED, ended);
    };
    const done = (async () => {
      try {
        await Promise.race([execute(queueName, job, controller), whenAborted(controller.signal)]);
        clearTimeout(timer);
        await settle(job, queueName, () => queue.complete(queueName, job.id, owner));
        finished('completed');
      } catch (err) {
        clearTimeout(timer);
        const released = controller.signal.reason instanceof JobReleased;
        const level = controller.signal.aborted ? 'warn' : 'error';
        log[level]({ err, job: job.id, queue: queueName, attempt: job.retryCount + 1 }, 'job failed');
        const options = owner ? { workerId: owner } : {};
        await settle(job, queueName, () =>
          released
            ? queue.release(queueName, job.id, (controller.signal.reason as Error).message, options)
            : queue.fail(queueName, job.id, err, options),
        );
        if (released) finished('released');
        else finished('failed', err);
      } finally {
        running.delete(job.id);
      }
    })();
    running.set(job.id, { name: queueName, controller, done });
    await done;
  }

  /** Stops running jobs without blaming them: each is given back for an immediate retry (no retry spent). */
  function releaseAll(reason: string) {
    for (const r of running.values()) r.controller.abort(new JobReleased(reason));
  }

  return {
    events,
    runJob,
    running,
    releaseAll,

    /**
     * Tests' `runJobs()`: sweeps due work, then fetches and runs jobs one at a time, queue by queue,
     * until nothing is left. Retry back-off is ignored (`ignoreStartAfter`), so a failing job runs
     * all its attempts now. Deterministic: no polling, no waiting on time. Answers how many jobs ran.
     */
    async drain({ maxRounds = 200 } = {}): Promise<number> {
      let total = 0;
      for (let round = 0; round < maxRounds; round++) {
        const swept = await sweep();
        let ran = 0;
        for (const name of queue.queueNames()) {
          for (;;) {
            const [job] = await queue.fetch(name, 1, { ignoreStartAfter: true });
            if (!job) break;
            await runJob(name, job);
            ran++;
          }
        }
        total += ran;
        if (ran === 0 && swept === 0) return total;
      }
      throw new Error(`runJobs: work was still coming after ${maxRounds} rounds`);
    },
  };
}

export type JobRunner = ReturnType<typeof createJobRunner>;

export interface WorkerDeps extends Omit<RunnerDeps, 'workerId'> {
  queue: RunnerDeps['queue'] &
    Pick<JobQueue, 'listen' | 'specOf' | 'register' | 'heartbeat' | 'reap' | 'readyQueues'>;
  config: JobsConfig;
}

/**
 * Workers for every queue of the catalog: each queue has a loop that fetches up to its concurrency,
 * sleeps until a NOTIFY wakes it (a job was committed) or the poll interval passes, and a sweeper
 * enqueues due work. The process holds a lease (jobs/leases.ts) that its fetches claim jobs under,
 * so a killed worker's jobs are retried within seconds. No loop ends on a database error: each logs
 * the outage once (jobs/outage.ts), backs off and resumes when the database answers again.
 * `stop()` drains: no new fetches, running jobs finish until the drain timeout, and what is still
 * running then is released (given back, its retries unspent, for an immediate retry elsewhere).
 */
export function createWorker(deps: WorkerDeps) {
  const { queue, config, log } = deps;
  const outage = deps.outage ?? createOutage(log);
  let runner: JobRunner;
  const lease = createLease({
    queue,
    config,
    log,
    outage,
    onLost: () => runner.releaseAll('this worker lost its lease; the job runs elsewhere'),
  });
  runner = createJobRunner({ ...deps, outage, workerId: () => lease.id });
  const sleepers = new Map<string, () => void>();
  const woken = new Set<string>();
  const loops: Promise<void>[] = [];
  let stopping = false;
  let sweeping: Promise<void> | null = null;
  let unlisten: (() => Promise<void>) | null = null;

  function wake(name: string) {
    woken.add(name);
    sleepers.get(name)?.();
  }

  function sleep(name: string, ms: number, inflight: Set<Promise<void>>, full: boolean): Promise<void> {
    if (woken.delete(name) && !full) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        sleepers.delete(name);
        resolve();
      }
      sleepers.set(name, done);
      // When every slot is busy, a finishing job frees one.
      if (full) void Promise.race(inflight).then(done);
    });
  }

  async function loop(name: string, concurrency: number) {
    const inflight = new Set<Promise<void>>();
    // Issue 29 defect 4: a loop starts asleep; the prober's first statement, at start, wakes the
    // queues that have ready work (a NOTIFY wakes one at any time). Before, the ~40 loops each fetched
    // at once: on PGlite, a round of ~40 transactions that held the first request for ~0.4-0.6 s.
    await sleep(name, fallbackMs(), inflight, false);
    while (!stopping) {
      const free = concurrency - inflight.size;
      let fetched = 0;
      let wait = config.pollIntervalMs;
      let failed = false;
      if (free > 0) {
        try {
          const jobs = await queue.fetch(name, free, { workerId: lease.id });
          outage.ok('fetch');
          fetched = jobs.length;
          for (const job of jobs) {
            const p: Promise<void> = runner.runJob(name, job).finally(() => inflight.delete(p));
            inflight.add(p);
          }
        } catch (err) {
          failed = true;
          wait = outage.failed(`fetch ${name}`, err);
        }
      }
      if (stopping) break;
      const full = inflight.size >= concurrency;
      // A full batch means more may be waiting: fetch again at once.
      if (fetched > 0 && fetched === free && !full) continue;
      // An idle queue sleeps until a NOTIFY or the prober (below) says it has work; the long
      // fallback only covers a prober that itself could not run.
      await sleep(name, fetched === 0 && !failed ? fallbackMs() : wait, inflight, full);
    }
  }

  /**
   * The fallback poll for every queue at once: one statement a poll interval names the queues with a
   * job ready now (a retry whose back-off passed, a NOTIFY lost while the connection was away), and
   * only their loops fetch. Before, each of the ~40 loops fetched its own queue every interval: most
   * of an idle process's CPU (decisions.md).
   */
  const PROBER = '\0prober';
  const idleFallbackMs = Math.max(config.pollIntervalMs * 15, 30_000);
  // Issue 29 defect 4: spread over one to two fallbacks, so that the ~40 loops that started together
  // do not all fetch in the same second (a burst of ~40 transactions every 30 s: under load, the
  // background pool had 10-23 queries waiting, and on PGlite the event loop stalled for it).
  const fallbackMs = () => idleFallbackMs * (1 + Math.random());
  const probeLoop = (names: string[]) =>
    every(PROBER, 'probe', config.pollIntervalMs, async () => {
      for (const name of await queue.readyQueues(names)) wake(name);
    });

  /** Runs `tick` every `intervalMs` until stopping; a failing tick backs off as the outage says. */
  async function every(name: string, label: string, intervalMs: number, tick: () => Promise<unknown>) {
    while (!stopping) {
      let wait = intervalMs;
      try {
        await tick();
        outage.ok(label);
      } catch (err) {
        wait = Math.max(wait, outage.failed(label, err));
      }
      if (stopping) break;
      await sleep(name, wait, new Set(), false);
    }
  }

  /** Sweeps due work now (one sweep at a time); rejects when this sweep fails. */
  async function sweepNow(): Promise<number> {
    while (sweeping) await sweeping;
    const run = deps.sweep();
    // The shared marker never rejects: only the caller of this sweep sees its error.
    sweeping = run.then(
      () => {},
      () => {},
    );
    void sweeping.then(() => {
      sweeping = null;
    });
    return run;
  }

  const SWEEPER = '\0sweeper';
  const sweepLoop = () => every(SWEEPER, 'sweep', config.sweepIntervalMs, sweepNow);

  return {
    runner,
    wake,
    sweepNow,
    workerId: lease.id,

    async start() {
      await lease.start();
      unlisten = await queue.listen(wake);
      const names = queue.queueNames();
      for (const name of names) {
        const spec = queue.specOf(name);
        loops.push(loop(name, spec?.concurrency ?? 1));
      }
      loops.push(sweepLoop());
      loops.push(probeLoop(names));
    },

    /** Drains: stop fetching; running jobs get `drainMs` to finish, then are released for a retry. */
    async stop(drainMs = config.drainSeconds * 1000) {
      stopping = true;
      for (const wakeUp of sleepers.values()) wakeUp();
      await Promise.all(loops);
      await unlisten?.();
      await sweeping;
      const inflight = [...runner.running.values()];
      if (inflight.length > 0) {
        log.info({ jobs: inflight.length, drainMs }, 'waiting for running jobs');
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), drainMs);
        });
        const finished = await Promise.race([
          Promise.all(inflight.map((r) => r.done)).then(() => 'done' as const),
          timeout,
        ]);
        clearTimeout(timer);
        if (finished !== 'done') {
          // Released: each job is given back, untried, for an immediate retry in a live worker.
          runner.releaseAll('released on shutdown');
          await Promise.all([...runner.running.values()].map((r) => r.done));
        }
      }
      await lease.stop();
    },
  };
}

export type Worker = ReturnType<typeof createWorker>;
