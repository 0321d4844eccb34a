import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { withTransaction } from '../../src/db/transaction.js';
import { JOBS, type JobContext, type JobHandler } from '../../src/jobs/catalog.js';
import { scheduleAt } from '../../src/jobs/due.js';
import { createJobRunner, createWorker, JOB_STARTED } from '../../src/jobs/worker.js';
import { buildTestApp } from '../support/harness.js';

// Attempts expire after 1 s here, so the expiry tests stay short.
const t = await buildTestApp({ env: { JOB_EXPIRE_SECONDS: '1' } });
const db = t.database.db;
const silent = { info() {}, warn() {}, error() {} };
const MESSAGE = '00000000-0000-4000-8000-00000000000a';

/** Handlers for every job name: `mail-deliver` does what the test says, the rest do nothing. */
function handlersWith(mail: Partial<JobHandler<{ message_id: string }>>) {
  const noop: JobHandler<never> = { run: async () => {}, exhausted: async () => {} };
  const handlers: Record<string, JobHandler<never>> = Object.fromEntries(
    Object.keys(JOBS).map((n) => [n, noop]),
  );
  handlers['mail-deliver'] = { ...noop, ...mail } as JobHandler<never>;
  return handlers;
}

const enqueueMail = (id: string = randomUUID()) =>
  withTransaction(db, (tx) => t.queue.enqueue(tx, 'mail-deliver', { message_id: id }));

describe('enqueue inside the transaction (style rule 5)', () => {
  it('G10 a job exists exactly when the transaction that asked for it commits', async () => {
    await assert.rejects(
      withTransaction(db, async (tx) => {
        await t.queue.enqueue(tx, 'mail-deliver', { message_id: randomUUID() });
        throw new Error('roll back');
      }),
      /roll back/,
    );
    assert.deepEqual(await t.queue.fetch('mail-deliver', 10), []);
    const id = await enqueueMail();
    const fetched = await t.queue.fetch('mail-deliver', 10);
    assert.deepEqual(
      fetched.map((j) => j.id),
      [id],
    );
    await t.queue.complete('mail-deliver', fetched[0]?.id ?? '');
  });

  it('G10 at most one queued job per key (policy short): a second send while one waits is dropped', async () => {
    const id = randomUUID();
    const first = await enqueueMail(id);
    assert.ok(first);
    assert.equal(await enqueueMail(id), null);
    const fetched = await t.queue.fetch('mail-deliver', 10);
    assert.deepEqual(
      fetched.map((j) => j.id),
      [first],
    );
    await t.queue.complete('mail-deliver', first);
  });

  it('G10 refuses a payload that does not match the job schema', async () => {
    await assert.rejects(
      withTransaction(db, (tx) => t.queue.enqueue(tx, 'mail-deliver', { message_id: 'nope' })),
      /invalid payload/,
    );
  });
});

describe('runJobs (the tests’ deterministic drain)', () => {
  it('G10 due work runs only once the (manual) clock reaches its run_at, then runs at once', async () => {
    const seen: string[] = [];
    const runner = createJobRunner({
      queue: t.queue,
      handlers: handlersWith({ run: async ({ message_id }) => void seen.push(message_id) }),
      sweep: t.app.services.due.sweep,
      log: silent,
    });
    const later = new Date(t.clock.now().getTime() + 3600_000);
    await withTransaction(db, (tx) =>
      scheduleAt(tx, 'engine-test:due', 'mail-deliver', { message_id: MESSAGE }, later),
    );
    assert.equal(await runner.drain(), 0);
    assert.deepEqual(seen, []);
    t.clock.advance(3600_000);
    assert.equal(await runner.drain(), 1);
    assert.deepEqual(seen, [MESSAGE]);
  });

  it('G10 a failing job is retried up to its retry limit, then its exhausted handler runs once', async () => {
    const attempts: JobContext[] = [];
    const exhausted: string[] = [];
    const runner = createJobRunner({
      queue: t.queue,
      handlers: handlersWith({
        run: async (_payload, ctx) => {
          attempts.push(ctx);
          throw new Error(`refused on attempt ${ctx.attempt}`);
        },
        exhausted: async (_payload, error) => void exhausted.push(error),
      }),
      sweep: async () => 0,
      log: silent,
    });
    await enqueueMail();
    await runner.drain();
    const limit = JOBS['mail-deliver'].retryLimit;
    assert.deepEqual(
      attempts.map((a) => a.attempt),
      Array.from({ length: limit + 1 }, (_, i) => i + 1),
    );
    assert.deepEqual(
      attempts.map((a) => a.lastAttempt),
      Array.from({ length: limit + 1 }, (_, i) => i === limit),
    );
    assert.deepEqual(exhausted, [`refused on attempt ${limit + 1}`]);
  });

  it('G10 an attempt that hangs past its expiry is aborted and retried', async () => {
    let calls = 0;
    const runner = createJobRunner({
      queue: t.queue,
      handlers: handlersWith({
        run: async (_payload, ctx) => {
          calls++;
          if (calls === 1) await once(ctx.signal, 'abort'); // hangs until the 1 s expiry
        },
      }),
      sweep: async () => 0,
      log: silent,
    });
    await enqueueMail();
    const started = Date.now();
    await runner.drain();
    assert.equal(calls, 2);
    assert.ok(Date.now() - started >= 900, 'the first attempt ran until its expiry');
  });
});

describe('workers', () => {
  const workerConfig = {
    pollIntervalMs: 60_000,
    sweepIntervalMs: 60_000,
    maintenanceSeconds: 60,
    drainSeconds: 5,
    expireSeconds: null,
    retryDelaySeconds: null,
    heartbeatSeconds: 3,
    leaseSeconds: 10,
  };

  /** A started worker whose mail handler runs `run`, once it has begun one mail job (its id). */
  async function workerRunningMail(run: JobHandler<{ message_id: string }>['run']) {
    const worker = createWorker({
      queue: t.queue,
      handlers: handlersWith({ run }),
      sweep: async () => 0,
      log: silent,
      config: workerConfig,
    });
    await worker.start();
    const started = once(worker.runner.events, JOB_STARTED);
    const id = await enqueueMail();
    await started;
    return { worker, id };
  }

  it('G10 a committed job wakes an idle worker at once (NOTIFY), not after the 60 s poll', async () => {
    const ran: string[] = [];
    const worker = createWorker({
      queue: t.queue,
      handlers: handlersWith({ run: async ({ message_id }) => void ran.push(message_id) }),
      sweep: async () => 0,
      log: silent,
      config: workerConfig,
    });
    await worker.start();
    try {
      const started = once(worker.runner.events, JOB_STARTED);
      const before = Date.now();
      await enqueueMail(MESSAGE);
      await started;
      assert.ok(Date.now() - before < 5000);
    } finally {
      await worker.stop();
    }
    assert.deepEqual(ran, [MESSAGE]);
  });

  it('G10 stop() drains: a running job finishes and is completed before stop resolves', async () => {
    let finished = false;
    const { worker, id } = await workerRunningMail(async () => {
      await new Promise((r) => setTimeout(r, 300));
      finished = true;
    });
    await worker.stop();
    assert.equal(finished, true);
    assert.equal((await t.queue.jobState('mail-deliver', id ?? ''))?.state, 'completed');
  });

  it('G10 stop() releases a job still running at the drain timeout: failed for a retry, not lost', async () => {
    const { worker, id } = await workerRunningMail((_p, ctx) => once(ctx.signal, 'abort').then(() => {}));
    await worker.stop(100);
    assert.equal((await t.queue.jobState('mail-deliver', id ?? ''))?.state, 'retry');
    // The released job is still there for the next worker.
    assert.equal((await t.runJobs()) >= 1, true);
  });

  it('issue 20 defect 3: a job released by six shutdowns in a row spends none of its retries; the next worker completes it', async () => {
    const releases = JOBS['mail-deliver'].retryLimit + 1; // one more than its retries: failed before the fix
    const attempts: JobContext[] = [];
    const exhausted: string[] = [];
    const id = await enqueueMail();
    for (let i = 0; i <= releases; i++) {
      const last = i === releases;
      const worker = createWorker({
        queue: t.queue,
        handlers: handlersWith({
          run: async (_p, ctx) => {
            attempts.push(ctx);
            if (!last) await once(ctx.signal, 'abort'); // longer than the drain: released
          },
          exhausted: async (_p, error) => void exhausted.push(error),
        }),
        sweep: async () => 0,
        log: silent,
        config: workerConfig,
      });
      const started = once(worker.runner.events, JOB_STARTED);
      await worker.start();
      await started;
      await worker.stop(last ? undefined : 0);
      if (!last)
        assert.deepEqual(await t.queue.jobState('mail-deliver', id ?? ''), { state: 'retry', retryCount: 0 });
    }
    assert.deepEqual(
      attempts.map((a) => `${a.attempt} ${a.lastAttempt}`),
      Array.from({ length: releases + 1 }, () => '1 false'),
      'a released attempt is not counted',
    );
    assert.deepEqual(exhausted, []);
    assert.deepEqual(await t.queue.jobState('mail-deliver', id ?? ''), { state: 'completed', retryCount: 0 });
  });
});
