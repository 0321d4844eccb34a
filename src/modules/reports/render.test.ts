import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { barChart, grouped, humanBytes, periodValue } from './render.js';

const day = (date: string, values: Record<string, string | null>) => ({
  date,
  visit_count: null,
  billable_visits: null,
  network_origin_bytes: null,
  network_cdn_bytes: null,
  network_total_bytes: null,
  storage_file_bytes: null,
  storage_database_bytes: null,
  request_origin_count: null,
  ...values,
});

describe('report figures', () => {
  it('groups and scales exactly above 2^53 (no float on the way)', () => {
    assert.equal(grouped('9007199254740993'), '9,007,199,254,740,993');
    assert.equal(humanBytes('9007199254740993'), '8.00 PiB');
    assert.equal(humanBytes('1536'), '1.50 KiB');
    assert.equal(humanBytes('1023'), '1023 bytes');
  });

  it('flows are summed over the period; storage is the last known day; nothing known is null', () => {
    const days = [
      day('2027-01-01', { visit_count: '9007199254740993', storage_file_bytes: '10' }),
      day('2027-01-02', { visit_count: '7', storage_file_bytes: null }),
    ];
    assert.equal(periodValue({ days }, 'visit_count'), '9007199254741000');
    assert.equal(periodValue({ days }, 'storage_file_bytes'), '10');
    assert.equal(periodValue({ days }, 'request_origin_count'), null);
  });

  it('a chart has one bar per known value, none for a day without data, and no script', () => {
    const svg = barChart(
      'Visits',
      ['2027-01-01', '2027-01-02', '2027-01-03'],
      [{ label: 'Visits', colour: '#000', values: ['5', null, '10'] }],
      'count',
    );
    assert.equal(svg.match(/class="bar"/g)?.length, 2);
    assert.match(svg, /^<svg class="chart" role="img" aria-label="Visits"/);
    assert.doesNotMatch(svg, /<script|href=/);
  });
});
