import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextRun, previousRun } from './schedule.js';

const d = (iso: string) => new Date(iso);
const iso = (date: Date) => date.toISOString();

/** The first `n` runs after `start` (each the next run after the one before). */
function runs(frequency: Parameters<typeof nextRun>[0], reference: string, n: number): string[] {
  const out: string[] = [];
  let at = d(reference);
  for (let i = 0; i < n; i++) {
    at = nextRun(frequency, d(reference), at);
    out.push(iso(at));
  }
  return out;
}

describe('nextRun (P3, P4)', () => {
  it('P4 MONTHLY 31 runs on the 31st, on 28 February (29 in a leap year), on 30 April', () => {
    assert.deepEqual(runs({ unit: 'MONTHLY', value: 31 }, '2027-01-31T09:30:00.000Z', 4), [
      '2027-02-28T09:30:00.000Z',
      '2027-03-31T09:30:00.000Z',
      '2027-04-30T09:30:00.000Z',
      '2027-05-31T09:30:00.000Z',
    ]);
    assert.deepEqual(runs({ unit: 'MONTHLY', value: 31 }, '2028-01-31T00:00:00.000Z', 1), [
      '2028-02-29T00:00:00.000Z',
    ]);
  });

  it('P4 MONTHLY 29 and 30 clamp only in the months that lack the day', () => {
    assert.deepEqual(runs({ unit: 'MONTHLY', value: 30 }, '2027-01-30T00:00:00.000Z', 2), [
      '2027-02-28T00:00:00.000Z',
      '2027-03-30T00:00:00.000Z',
    ]);
    assert.deepEqual(runs({ unit: 'MONTHLY', value: 29 }, '2028-01-29T00:00:00.000Z', 2), [
      '2028-02-29T00:00:00.000Z',
      '2028-03-29T00:00:00.000Z',
    ]);
  });

  it('P4 MONTHLY 1 crosses the year end; a reference off the pattern gives its time of day only', () => {
    assert.deepEqual(runs({ unit: 'MONTHLY', value: 1 }, '2027-11-01T06:00:00.000Z', 3), [
      '2027-12-01T06:00:00.000Z',
      '2028-01-01T06:00:00.000Z',
      '2028-02-01T06:00:00.000Z',
    ]);
    // First run on the 15th as asked; then the 31st of the same month.
    assert.equal(
      iso(nextRun({ unit: 'MONTHLY', value: 31 }, d('2027-01-15T08:00:00Z'), d('2027-01-15T08:00:00Z'))),
      '2027-01-31T08:00:00.000Z',
    );
  });

  it('P3 DAYS 7 and 14 keep the weekday and time of the reference', () => {
    const weekly = runs({ unit: 'DAYS', value: 7 }, '2027-03-02T10:00:00.000Z', 3); // a Tuesday
    assert.deepEqual(weekly, [
      '2027-03-09T10:00:00.000Z',
      '2027-03-16T10:00:00.000Z',
      '2027-03-23T10:00:00.000Z',
    ]);
    const fortnightly = runs({ unit: 'DAYS', value: 14 }, '2027-03-02T10:00:00.000Z', 30);
    for (const run of fortnightly) assert.equal(d(run).getUTCDay(), 2, run);
    assert.equal(fortnightly[29], '2028-04-25T10:00:00.000Z'); // 420 days on, across 29 February
  });

  it('P3 DAYS: after a gap, the first run past the given time, still on the weekday', () => {
    const next = nextRun({ unit: 'DAYS', value: 14 }, d('2027-03-02T10:00:00Z'), d('2027-05-01T00:00:00Z'));
    assert.equal(iso(next), '2027-05-11T10:00:00.000Z');
    // A reference in the future is itself the next run.
    assert.equal(
      iso(nextRun({ unit: 'DAYS', value: 7 }, d('2027-03-02T10:00:00Z'), d('2027-03-01T00:00:00Z'))),
      '2027-03-02T10:00:00.000Z',
    );
  });

  it('the run strictly after: a run exactly at `after` is not the next one', () => {
    const at = d('2027-04-30T00:00:00Z');
    assert.equal(iso(nextRun({ unit: 'MONTHLY', value: 31 }, at, at)), '2027-05-31T00:00:00.000Z');
  });
});

describe('previousRun', () => {
  it('one step back of the same rule (the start of a first report)', () => {
    assert.equal(
      iso(previousRun({ unit: 'MONTHLY', value: 31 }, d('2028-02-29T00:00:00Z'))),
      '2028-01-31T00:00:00.000Z',
    );
    assert.equal(
      iso(previousRun({ unit: 'MONTHLY', value: 31 }, d('2027-05-31T00:00:00Z'))),
      '2027-04-30T00:00:00.000Z',
    );
    assert.equal(
      iso(previousRun({ unit: 'DAYS', value: 14 }, d('2027-03-16T10:00:00Z'))),
      '2027-03-02T10:00:00.000Z',
    );
  });
});
