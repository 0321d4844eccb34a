import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { machineSerial } from './machine-lock.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Another process holding the lock (what a second worker's driver is): resolves once it holds it. */
async function outsideHolder(file: string) {
  const child = spawn('flock', ['--exclusive', file, '--command', 'echo held && exec cat'], {
    stdio: ['pipe', 'pipe', 'ignore'],
    detached: true,
  });
  child.stdin.on('error', () => {}); // released after a kill: the pipe is gone
  await new Promise((resolve) => child.stdout.once('data', resolve));
  const ended = new Promise((resolve) => child.once('close', resolve));
  return {
    release: () => child.stdin.end(),
    kill: () => process.kill(-(child.pid as number), 'SIGKILL'),
    ended,
  };
}

type Holder = Awaited<ReturnType<typeof outsideHolder>>;

/**
 * A change asked while another process holds the lock on `file`: it does not run while held, and runs
 * once `free` ends the other's hold. Answers the other holder.
 */
async function waitsWhileHeld(file: string, free: (holder: Holder) => void): Promise<Holder> {
  const other = await outsideHolder(file);
  try {
    let ran = false;
    const done = machineSerial(file)(async () => {
      ran = true;
    });
    await sleep(300);
    assert.equal(ran, false, 'ran while another process held the lock');
    free(other);
    await done;
    assert.equal(ran, true);
    return other;
  } finally {
    other.release();
  }
}

describe("issue 30: one writer of a machine's web configuration, across processes (machine-lock.ts)", async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-machine-lock-'));
  after(() => fs.rm(dir, { recursive: true, force: true }));

  it('two drivers (each its own in-process chain, as two worker processes have) never run their changes at once', async () => {
    const file = path.join(dir, 'run', 'nginx.lock');
    const [a, b] = [machineSerial(file), machineSerial(file)];
    const spans: { who: string; from: number; to: number }[] = [];
    const change = (who: string) => async () => {
      const from = performance.now();
      await sleep(30);
      spans.push({ who, from, to: performance.now() });
    };
    await Promise.all([0, 1, 2].flatMap(() => [a(change('a')), b(change('b'))]));
    assert.equal(spans.length, 6);
    spans.sort((x, y) => x.from - y.from);
    for (let i = 1; i < spans.length; i++)
      assert.ok(
        (spans[i]?.from ?? 0) >= (spans[i - 1]?.to ?? 0),
        `changes overlapped: ${JSON.stringify(spans)}`,
      );
    assert.deepEqual([...new Set(spans.map((s) => s.who))].sort(), ['a', 'b']);
  });

  it('a change waits while another process holds the lock, and runs once it is released', async () => {
    const other = await waitsWhileHeld(path.join(dir, 'wait.lock'), (holder) => holder.release());
    await other.ended;
  });

  it('a holder killed (SIGKILL) leaves no stale lock: the waiting change runs', async () => {
    await waitsWhileHeld(path.join(dir, 'killed.lock'), (holder) => holder.kill());
  });

  it('a failing change releases the lock and the next one runs', async () => {
    const serial = machineSerial(path.join(dir, 'fail.lock'));
    await assert.rejects(
      serial(async () => {
        throw new Error('nginx -t failed');
      }),
      /nginx -t failed/,
    );
    assert.equal(await serial(async () => 'next'), 'next');
  });
});
