import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { allOrAbort, output, run } from './run.js';

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

describe('run: a failed tool says why (issue 29 defect 2)', () => {
  const env = { PATH: '/usr/bin:/bin' };
  it("carries the end of the tool's stdout and stderr, and marks a permission refusal final", async () => {
    // PHP says on stdout that it cannot open its script (what a HOSTING_ROOT nobody can pass gave).
    await assert.rejects(
      run('/usr/bin/php8.2', ['/nonexistent/x.php'], { signal: AbortSignal.timeout(10_000), env }),
      (err: Error & { final?: boolean }) => {
        assert.match(err.message, /php8\.2 exited 1: Could not open input file: \/nonexistent\/x\.php/);
        assert.equal(err.final, true);
        return true;
      },
    );
    await assert.rejects(
      run('sh', ['-c', 'for i in 1 2 3 4 5 6 7; do echo line $i >&2; done; exit 3'], {
        signal: AbortSignal.timeout(10_000),
        env,
      }),
      (err: Error & { final?: boolean }) => {
        assert.equal(err.message, 'sh exited 3: line 3 | line 4 | line 5 | line 6 | line 7');
        assert.equal(err.final, false, 'an ordinary failure may be retried');
        return true;
      },
    );
  });

  it('a tool that is not installed is final', async () => {
    await assert.rejects(
      run('/usr/bin/no-such-tool', [], { signal: AbortSignal.timeout(10_000), env }),
      (err: Error & { final?: boolean }) => {
        assert.match(err.message, /not found \(is its package installed\?\)/);
        assert.equal(err.final, true);
        return true;
      },
    );
  });
});

describe('output: a small output, answered whole', () => {
  it('answers stdout; says why a tool failed; a tool saying over 1 MiB is killed and fails', async () => {
    const signal = AbortSignal.timeout(10_000);
    assert.equal(await output('sh', ['-c', 'echo hello; echo noise >&2'], signal), 'hello\n');
    await assert.rejects(output('sh', ['-c', 'echo why >&2; exit 4'], signal), /sh failed: why/);
    await assert.rejects(
      output('sh', ['-c', 'head -c 3000000 /dev/zero; sleep 30'], signal),
      /sh failed: said more than 1048576 bytes/,
    );
  });
});
