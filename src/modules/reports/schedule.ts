/** P3/P4: how often a report runs. DAYS: every 7 or 14 days; MONTHLY: on day 1-31 of each month. */
export interface Frequency {
  unit: 'DAYS' | 'MONTHLY';
  value: number;
}

const DAY_MS = 86_400_000;

const daysInMonth = (year: number, month: number) => new Date(Date.UTC(year, month + 1, 0)).getUTCDate();

/** P4: day `day` of a month at `reference`'s time of day; a day the month lacks is its last day. */
function monthly(year: number, month: number, day: number, reference: Date): Date {
  const date = Math.min(day, daysInMonth(year, month));
  return new Date(
    Date.UTC(
      year,
      month,
      date,
      reference.getUTCHours(),
      reference.getUTCMinutes(),
      reference.getUTCSeconds(),
      reference.getUTCMilliseconds(),
    ),
  );
}

/**
 * The next run of a schedule: the first run strictly after `after`. The runs are fixed by the
 * frequency and a `reference` run (a next_scheduled_date):
 * - DAYS (P3): `reference` plus or minus whole multiples of 7 or 14 days, so every run falls on
 *   the weekday (and time of day) of `reference`;
 * - MONTHLY (P4): day `value` of every month at `reference`'s time of day (UTC); in a month without
 *   that day (29-31), its last day.
 * All dates are UTC. This is the only place run dates are computed.
 */
export function nextRun(frequency: Frequency, reference: Date, after: Date): Date {
  if (frequency.unit === 'DAYS') {
    const step = frequency.value * DAY_MS;
    const steps = Math.floor((after.getTime() - reference.getTime()) / step) + 1;
    return new Date(reference.getTime() + steps * step);
  }
  let year = after.getUTCFullYear();
  let month = after.getUTCMonth();
  for (;;) {
    const run = monthly(year, month, frequency.value, reference);
    if (run.getTime() > after.getTime()) return run;
    month += 1;
    if (month === 12) {
      month = 0;
      year += 1;
    }
  }
}

/** The run before `run` (the start of a first report's period): one step back of the same rule. */
export function previousRun(frequency: Frequency, run: Date): Date {
  if (frequency.unit === 'DAYS') return new Date(run.getTime() - frequency.value * DAY_MS);
  // Searching from 62 days back, the last run that is still before `run`.
  let candidate = nextRun(frequency, run, new Date(run.getTime() - 62 * DAY_MS));
  for (;;) {
    const following = nextRun(frequency, run, candidate);
    if (following.getTime() >= run.getTime()) return candidate;
    candidate = following;
  }
}

/** Midnight UTC of the day `date` falls on. */
export const startOfUtcDay = (date: Date) =>
  new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()));
