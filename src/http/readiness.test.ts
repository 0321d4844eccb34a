import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../errors.js';
import { boundedCheck, probeTimeoutMs } from './readiness.js';

describe('bounded readiness check (issue 20 defect 4)', () => {
  it('issue 20 defect 4: a check that never answers is a 503 after the budget; probes meanwhile share the one check in flight', async () => {
    let calls = 0;
    let answer: () => void = () => {};
    const ready = boundedCheck(() => {
      calls++;
      return new Promise<void>((resolve) => {
        answer = resolve;
      });
    }, 50);
    const outcomes = await Promise.allSettled([ready(), ready(), ready()]);
    for (const outcome of outcomes) {
      assert.equal(outcome.status, 'rejected');
      assert.ok(outcome.reason instanceof AppError);
      assert.equal(outcome.reason.status, 503);
    }
    // Still in flight: a later probe waits on it (no second ping), and is answered when it is.
    const later = ready();
    assert.equal(calls, 1);
    answer();
    await later;
    // Settled: the next probe asks again.
    const next = ready();
    assert.equal(calls, 2);
    answer();
    await next;
  });

  it('a failing check fails the probe with its own error (the error renderer makes it a 503)', async () => {
    const ready = boundedCheck(() => Promise.reject(new Error('connection refused')), 1000);
    await assert.rejects(ready(), /connection refused/);
  });

  it('the budget is an API statement, client read timeout included: 2.5 s by default', () => {
    assert.equal(
      probeTimeoutMs({ acquireTimeoutMs: 1500, apiStatementTimeoutMs: 1500, jobStatementTimeoutMs: 15_000 }),
      2500,
    );
  });
});
