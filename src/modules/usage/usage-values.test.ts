import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { average, type Day, fillStorage, METRICS, parseValue, rollupOf } from './usage-values.js';

const day = (date: string, values: Partial<Day> = {}): Day =>
  ({ date, ...Object.fromEntries(METRICS.map((m) => [m, null])), ...values }) as Day;

describe('usage values', () => {
  it('parseValue keeps int64 exact: safe numbers, strings of digits up to 2^63-1', () => {
    assert.deepEqual(parseValue(12), { ok: '12' });
    assert.deepEqual(parseValue(null), { ok: null });
    assert.deepEqual(parseValue('9007199254740993'), { ok: '9007199254740993' });
    assert.deepEqual(parseValue('9223372036854775807'), { ok: '9223372036854775807' });
    assert.deepEqual(parseValue('007'), { ok: '7' });
    for (const bad of ['9223372036854775808', '-1', '1.5', '', ' 1', -1, 1.5, 2 ** 53, true, {}]) {
      assert.ok('problem' in parseValue(bad), String(bad));
    }
  });
  it('average rounds half up on exact integers', () => {
    assert.equal(average(10n, 4), 3n);
    assert.equal(average(9n, 4), 2n);
    assert.equal(average(2n ** 64n, 3), 6148914691236517205n);
  });
  it('fillStorage carries the last known storage figures forward, never past today', () => {
    const days = fillStorage(
      [
        day('2025-01-01'),
        day('2025-01-02', { storage_file_bytes: '5' }),
        day('2025-01-03'),
        day('2025-01-04'),
      ],
      { storage_file_bytes: '1', storage_database_bytes: '9' },
      '2025-01-03',
    );
    assert.deepEqual(
      days.map((d) => [d.storage_file_bytes, d.storage_database_bytes]),
      [
        ['1', '9'],
        ['5', '9'],
        ['5', '9'],
        [null, null],
      ],
    );
  });
  it('rollupOf: traffic sum and average over days with data; storage the latest day', () => {
    const r = rollupOf([
      day('2025-01-01', { visit_count: '3', storage_file_bytes: '7' }),
      day('2025-01-02'),
      day('2025-01-03', { visit_count: '9007199254740993', storage_file_bytes: '8' }),
    ]);
    assert.deepEqual(r.visit_count, { sum: '9007199254740996', average: '4503599627370498', latest: null });
    assert.deepEqual(r.storage_file_bytes, {
      sum: null,
      average: null,
      latest: { date: '2025-01-03', value: '8' },
    });
    assert.deepEqual(r.billable_visits, { sum: null, average: null, latest: null });
  });
});
