import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppError } from '../../errors.js';
import { datesOf, oldestFirstDate, resolveRange } from './usage-range.js';

const now = new Date('2025-03-15T10:00:00Z');
const fieldOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AppError);
    assert.equal(err.status, 400);
    return err.fieldErrors[0]?.field;
  }
  assert.fail('expected a 400');
};

describe('resolveRange (M1-M4)', () => {
  it('M4 without dates covers the last 30 days, today included', () => {
    const range = resolveRange({}, now);
    assert.deepEqual(range, { first: '2025-02-14', last: '2025-03-15' });
    assert.equal(datesOf(range).length, 30);
  });
  it('M1 needs both dates or neither', () => {
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2025-03-01' }, now)),
      'last_date',
    );
    assert.equal(
      fieldOf(() => resolveRange({ last_date: '2025-03-01' }, now)),
      'first_date',
    );
  });
  it('M2 accepts 31 days and refuses 32', () => {
    assert.equal(
      datesOf(resolveRange({ first_date: '2025-01-01', last_date: '2025-01-31' }, now)).length,
      31,
    );
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2025-01-01', last_date: '2025-02-01' }, now)),
      'last_date',
    );
  });
  it('M3 refuses a first_date older than 13 months', () => {
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2024-02-01', last_date: '2024-02-02' }, now)),
      'first_date',
    );
    assert.ok(resolveRange({ first_date: '2024-02-16', last_date: '2024-02-17' }, now));
  });
  it('M3 13 months to the day: the same day 13 months back passes, the day before is refused', () => {
    assert.ok(resolveRange({ first_date: '2024-02-15', last_date: '2024-02-15' }, now));
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2024-02-14', last_date: '2024-02-15' }, now)),
      'first_date',
    );
  });
  it('M3 a day missing from the month 13 months back clamps to its last day', () => {
    assert.equal(oldestFirstDate(new Date('2026-03-31T23:59:59Z')), '2025-02-28');
    assert.equal(oldestFirstDate(new Date('2025-03-31T00:00:00Z')), '2024-02-29');
    assert.equal(oldestFirstDate(new Date('2026-01-31T00:00:00Z')), '2024-12-31');
  });
  it('M1 a date that does not exist is a 400 on its field', () => {
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2025-02-29', last_date: '2025-03-01' }, now)),
      'first_date',
    );
  });
  it('M1 a reversed range is a 400 on last_date', () => {
    assert.equal(
      fieldOf(() => resolveRange({ first_date: '2025-03-02', last_date: '2025-03-01' }, now)),
      'last_date',
    );
  });
});
