import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createOutage } from './outage.js';

function recorder() {
  const lines: { level: string; msg: string }[] = [];
  return {
    lines,
    log: {
      info: (_obj: object, msg: string) => void lines.push({ level: 'info', msg }),
      warn: (_obj: object, msg: string) => void lines.push({ level: 'warn', msg }),
    },
  };
}

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('outage tracker (issue 9)', () => {
  it('logs the first failure of an outage and its end once, however many loops fail meanwhile', () => {
    const { lines, log } = recorder();
    const outage = createOutage(log);
    for (let i = 0; i < 50; i++) outage.failed(`fetch ${i % 7}`, refused);
    assert.equal(outage.down, true);
    outage.ok('fetch');
    outage.ok('sweep');
    assert.equal(outage.down, false);
    assert.deepEqual(
      lines.map((l) => l.level),
      ['warn', 'info'],
    );
    assert.match(lines[0]?.msg ?? '', /database unavailable/);
    assert.match(lines[1]?.msg ?? '', /database available again/);
  });

  it('backs off exponentially with jitter, capped, and starts over after a success', () => {
    const outage = createOutage(recorder().log, { baseMs: 100, maxMs: 1000 });
    const delays = Array.from({ length: 8 }, () => outage.failed('sweep', refused));
    assert.ok(delays[0] !== undefined && delays[0] >= 50 && delays[0] <= 100);
    assert.ok(delays.every((d) => d <= 1000));
    assert.ok((delays[7] ?? 0) >= 500);
    outage.ok('sweep');
    assert.ok(outage.failed('sweep', refused) <= 100);
  });

  it('a failure that is not an outage (a bad query) is logged every time, not as an outage', () => {
    const { lines, log } = recorder();
    const outage = createOutage(log);
    outage.failed('sweep', new Error('syntax error'));
    outage.failed('sweep', new Error('syntax error'));
    assert.equal(outage.down, false);
    assert.equal(lines.length, 2);
    assert.match(lines[0]?.msg ?? '', /background work failed/);
  });
});
