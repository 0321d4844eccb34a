import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLimiter } from './limiter.js';

describe('createLimiter', () => {
  it('runs at most `limit` tasks at once and hands a freed slot to the next in line', async () => {
    const limited = createLimiter(2);
    let running = 0;
    let peak = 0;
    const task = async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 5));
      running--;
    };
    const signal = new AbortController().signal;
    await Promise.all(Array.from({ length: 7 }, () => limited(signal, task)));
    assert.equal(peak, 2);
  });

  it('a waiting task whose signal aborts gives up', async () => {
    const limited = createLimiter(1);
    let release = () => {};
    const first = limited(new AbortController().signal, () => new Promise<void>((r) => (release = r)));
    const controller = new AbortController();
    const second = limited(controller.signal, async () => 'ran');
    controller.abort();
    await assert.rejects(second, /gave up waiting/);
    release();
    await first;
  });
});
