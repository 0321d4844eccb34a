import { Errors } from '../../errors.js';

const DAY_MS = 86_400_000;
/** M2: at most 31 days, both ends inclusive. */
export const MAX_RANGE_DAYS = 31;
/** M4: without dates, the last 30 days (today included). */
export const DEFAULT_RANGE_DAYS = 30;

export const isoDate = (d: Date) => d.toISOString().slice(0, 10);
const parse = (s: string) => new Date(`${s}T00:00:00Z`);

/** M1-M4: the inclusive date range of a usage query, or a 400 naming the broken rule. */
export function resolveRange(
  query: { first_date?: string; last_date?: string },
  now: Date,
): { first: string; last: string } {
  const { first_date: first, last_date: last } = query;
  if ((first === undefined) !== (last === undefined)) {
    const missing = first === undefined ? 'first_date' : 'last_date';
    throw Errors.invalidValue(
      'usage',
      missing,
      'first_date and last_date must be given together, or neither',
    );
  }
  if (first === undefined || last === undefined) {
    const today = parse(isoDate(now));
    return {
      first: isoDate(new Date(today.getTime() - (DEFAULT_RANGE_DAYS - 1) * DAY_MS)),
      last: isoDate(today),
    };
  }
  const from = parse(first);
  const to = parse(last);
  for (const [field, value, date] of [
    ['first_date', first, from],
    ['last_date', last, to],
  ] as const) {
    if (Number.isNaN(date.getTime()) || isoDate(date) !== value) {
      throw Errors.invalidValue('usage', field, `${field} "${value}" is not a date (YYYY-mm-dd)`);
    }
  }
  if (to < from) throw Errors.invalidValue('usage', 'last_date', 'last_date must not be before first_date');
  if ((to.getTime() - from.getTime()) / DAY_MS + 1 > MAX_RANGE_DAYS) {
    throw Errors.invalidValue('usage', 'last_date', `The range cannot exceed ${MAX_RANGE_DAYS} days`);
  }
  const oldest = oldestFirstDate(now);
  if (first < oldest) {
    throw Errors.invalidValue(
      'usage',
      'first_date',
      `first_date cannot be older than 13 months (the oldest allowed today is ${oldest})`,
    );
  }
  return { first, last };
}

/**
 * M3: the oldest first_date allowed at `now`: the same day 13 months earlier, or that month's last
 * day when it is shorter (13 months before 2026-03-31 is 2025-02-28).
 */
export function oldestFirstDate(now: Date): string {
  const months = now.getUTCFullYear() * 12 + now.getUTCMonth() - 13;
  const year = Math.floor(months / 12);
  const month = months % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return isoDate(new Date(Date.UTC(year, month, Math.min(now.getUTCDate(), lastDay))));
}

/** Every date of an inclusive range, oldest first. */
export function datesOf(range: { first: string; last: string }): string[] {
  const out: string[] = [];
  for (let t = parse(range.first).getTime(); t <= parse(range.last).getTime(); t += DAY_MS) {
    out.push(isoDate(new Date(t)));
  }
  return out;
}
