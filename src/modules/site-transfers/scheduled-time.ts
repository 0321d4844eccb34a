/** T6: how far ahead a scheduled transfer may lie (both bounds excluded). */
export const MIN_AHEAD_MS = 60 * 60 * 1000;
export const MAX_AHEAD_MS = 7 * 24 * 60 * 60 * 1000;

// RFC 3339 section 5.6 date-time: a full date, a full time and a mandatory offset (Z or +hh:mm).
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/** The instant an RFC 3339 date-time with an offset names, or null when it is not one. */
export function parseRfc3339(value: string): Date | null {
  const m = RFC3339.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const offsetHours = m[9] === undefined ? 0 : Number(m[9]);
  const offsetMinutes = m[10] === undefined ? 0 : Number(m[10]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return null;
  const fraction = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  const local = Date.UTC(year, month - 1, day, hour, minute, second, fraction);
  const sign = m[8] === '-' ? -1 : 1;
  return new Date(local - sign * (offsetHours * 60 + offsetMinutes) * 60_000);
}

export type ScheduleProblem = 'format' | 'too_soon' | 'too_late';

/** T6: the scheduled instant (UTC) or why it is refused; the window is (now + 1 h, now + 7 d). */
export function checkScheduledTime(value: string, now: Date): { at: Date } | { problem: ScheduleProblem } {
  const at = parseRfc3339(value);
  if (!at) return { problem: 'format' };
  const ahead = at.getTime() - now.getTime();
  if (ahead <= MIN_AHEAD_MS) return { problem: 'too_soon' };
  if (ahead >= MAX_AHEAD_MS) return { problem: 'too_late' };
  return { at };
}
