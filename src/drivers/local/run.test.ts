import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { allOrAbort, run } from './run.js';

describe("allOrAbort (local driver: processes side by side, e.g. a backup's tar and dump)", () => {
  it('runs the tasks side by side and resolves when all are done', async () => {
    const order: string[] = [];
    const started = Date.now();
    await allOrAbort(new AbortController().signal, [
      async () => {
        order.push('a start');
        await sleep(50);
        order.push('a end');
      },
      async () => {
        order.push('b start');
        await sleep(50);
        order.push('b end');
      },
    ]);
    assert.deepEqual(order.slice(0, 2), ['a start', 'b start']);
    assert.equal(order.length, 4);
    assert.ok(Date.now() - started >= 45);
  });

  it('a failure aborts the others, waits for them to stop, and throws the first failure (not the abort it caused)', async () => {
    const failure = new Error('dump failed');
    let other = 'running';
    await assert.rejects(
      allOrAbort(new AbortController().signal, [
        async (signal) => {
          // A real process: killed by the abort, not left running.
          await run('sleep', ['30'], { signal, env: { PATH: '/usr/bin:/bin' } }).then(
            () => {
              other = 'finished';
            },
            (err: Error) => {
              other = err.name;
              throw err;
            },
          );
        },
        async () => {
          await sleep(20);
          throw failure;
        },
      ]),
      (err) => err === failure,
    );
    // Killed by the abort (and its process gone before allOrAbort answered), not run to its end.
    assert.equal(other, 'AbortError');
  });

  it("the caller's abort, before or during, stops every task and is what is thrown", async () => {
    const caller = new AbortController();
    const reason = new Error('worker shutting down');
    const pending = allOrAbort(caller.signal, [
      (signal) => run('sleep', ['30'], { signal, env: { PATH: '/usr/bin:/bin' } }),
      (signal) => run('sleep', ['30'], { signal, env: { PATH: '/usr/bin:/bin' } }),
    ]);
    setTimeout(() => caller.abort(reason), 20);
    await assert.rejects(pending, (err) => err === reason);
    const already = new AbortController();
    already.abort(reason);
    let ran = false;
    await assert.rejects(
      allOrAbort(already.signal, [
        async (signal) => {
          ran = true;
          if (signal.aborted) throw signal.reason;
        },
      ]),
      (err) => err === reason,
    );
    assert.equal(ran, true);
  });
});
