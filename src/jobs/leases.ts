import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { JobsConfig } from '../config.js';
import type { Outage } from './outage.js';
import type { JobQueue } from './queue.js';

export interface LeaseDeps {
  queue: Pick<JobQueue, 'register' | 'heartbeat' | 'reap'>;
  config: Pick<JobsConfig, 'heartbeatSeconds' | 'leaseSeconds'>;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  outage: Outage;
  /** Called when this worker finds its lease reaped: its running jobs were handed on; stop them. */
  onLost: () => void;
}

/**
 * A worker process's lease (docs/decisions.md, "worker leases"). The worker registers a row and
 * refreshes its heartbeat every `heartbeatSeconds`; it claims each job it fetches under that row.
 * After each heartbeat the worker also reaps: a worker silent for `leaseSeconds` is dead (SIGKILL,
 * power loss), so its claimed jobs fail and are retried at once in a live worker instead of waiting
 * for pg-boss's expiry (minutes). A healthy step may still run for its whole expiry: the lease is
 * about the process, not the job. A worker that finds its own lease reaped (it was cut off from the
 * database for longer than the lease) stops its running jobs (they run elsewhere now), registers
 * again and goes on. Heartbeats use the database's clock, so workers' clocks need not agree.
 */
export function createLease({ queue, config, log, outage, onLost }: LeaseDeps) {
  const id = randomUUID();
  const me = { id, host: os.hostname().slice(0, 255), pid: process.pid };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let beating: Promise<void> | null = null;

  async function beat() {
    try {
      if (!(await queue.heartbeat(id))) {
        log.warn(
          { worker: id },
          'this worker lost its lease (cut off too long): its jobs were retried elsewhere',
        );
        onLost();
        await queue.register(me);
      }
      outage.ok('heartbeat');
    } catch (err) {
      outage.failed('heartbeat', err);
      return; // no reaping on a beat that failed: this worker may be the one cut off
    }
    try {
      const reaped = await queue.reap({ lapseSeconds: config.leaseSeconds });
      if (reaped > 0) log.warn({ jobs: reaped }, 'jobs of a dead worker (lease lapsed) were retried');
    } catch (err) {
      outage.failed('reap', err);
    }
  }

  function next() {
    if (stopped) return;
    timer = setTimeout(() => {
      beating = beat().finally(() => {
        beating = null;
        next();
      });
    }, config.heartbeatSeconds * 1000);
  }

  return {
    id,

    /** Registers the lease (the worker's start fails when the database cannot be reached). */
    async start() {
      await queue.register(me);
      next();
    },

    /** Stops the heartbeat, then retires the lease: claims still held (a drain that could not record) are given back, no retry spent. */
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await beating;
      try {
        await queue.reap({ id });
      } catch (err) {
        log.warn({ err, worker: id }, 'could not retire the lease; other workers reap it once it lapses');
      }
    },
  };
}

export type Lease = ReturnType<typeof createLease>;
