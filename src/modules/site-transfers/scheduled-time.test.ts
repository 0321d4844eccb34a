import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkScheduledTime, parseRfc3339 } from './scheduled-time.js';

describe('T6 scheduled_time', () => {
  it('T6 parses RFC 3339 with Z or an offset and normalises to UTC', () => {
    assert.equal(parseRfc3339('2026-06-01T14:30:00Z')?.toISOString(), '2026-06-01T14:30:00.000Z');
    assert.equal(parseRfc3339('2026-06-01T16:30:00+02:00')?.toISOString(), '2026-06-01T14:30:00.000Z');
    assert.equal(parseRfc3339('2026-06-01t09:00:00.25-05:30')?.toISOString(), '2026-06-01T14:30:00.250Z');
  });

  it('T6 refuses a date-time without an offset, an impossible date and other strings', () => {
    for (const bad of [
      '2026-06-01T14:30:00',
      '2026-06-01 14:30:00Z',
      '2026-02-30T10:00:00Z',
      '2026-06-01T24:00:00Z',
      '2026-06-01T10:00:00+25:00',
      '2026-06-01',
      'tomorrow',
      '',
    ]) {
      assert.equal(parseRfc3339(bad), null, bad);
    }
  });

  it('T6 the window is strictly between 1 hour and 7 days ahead', () => {
    const now = new Date('2026-06-01T00:00:00Z');
    assert.deepEqual(checkScheduledTime('2026-06-01T01:00:00Z', now), { problem: 'too_soon' });
    assert.deepEqual(checkScheduledTime('2026-06-01T01:00:00.001Z', now), {
      at: new Date('2026-06-01T01:00:00.001Z'),
    });
    assert.deepEqual(checkScheduledTime('2026-06-08T00:00:00Z', now), { problem: 'too_late' });
    assert.deepEqual(checkScheduledTime('2026-06-07T23:59:59Z', now), {
      at: new Date('2026-06-07T23:59:59Z'),
    });
    assert.deepEqual(checkScheduledTime('2026-05-31T00:00:00Z', now), { problem: 'too_soon' });
    assert.deepEqual(checkScheduledTime('soon', now), { problem: 'format' });
  });
});
