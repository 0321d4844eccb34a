import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renewalTime } from './certificates.order.service.js';

const DAY = 86_400_000;

describe('renewalTime (issue 21: ordered certificates renewed as due work before expiry)', () => {
  it('a 90-day certificate is renewed 30 days before it expires', () => {
    const from = new Date('2026-01-01T00:00:00Z');
    const to = new Date(from.getTime() + 90 * DAY);
    assert.equal(renewalTime(from, to).toISOString(), new Date(to.getTime() - 30 * DAY).toISOString());
  });
  it('a long-lived certificate (Pebble: 5 years) is renewed 30 days before; a short one a third of its life before', () => {
    const from = new Date('2026-01-01T00:00:00Z');
    const long = new Date(from.getTime() + 1826 * DAY);
    assert.equal(renewalTime(from, long).getTime(), long.getTime() - 30 * DAY);
    const short = new Date(from.getTime() + 6 * DAY);
    assert.equal(renewalTime(from, short).getTime(), short.getTime() - 2 * DAY);
  });
  it('a certificate whose dates are reversed is renewed at its expiry, not after', () => {
    const to = new Date('2026-01-01T00:00:00Z');
    assert.equal(renewalTime(new Date(to.getTime() + DAY), to).getTime(), to.getTime());
  });
});
