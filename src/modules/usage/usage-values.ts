/**
 * Usage values are int64 and exceed 2^53 (bytes), so they are decimal strings end to end: stored as
 * bigint, summed in SQL (numeric) or with BigInt here, never a JS number.
 */

/** The eight metrics of the spec's usage responses (M5, M6), per day. */
export const METRICS = [
  'visit_count',
  'billable_visits',
  'network_origin_bytes',
  'network_cdn_bytes',
  'network_total_bytes',
  'storage_file_bytes',
  'storage_database_bytes',
  'request_origin_count',
] as const;
export type Metric = (typeof METRICS)[number];

/** Point-in-time metrics: a day's value replaces the previous one (summed over installs, never days). */
export const STORAGE_METRICS = ['storage_file_bytes', 'storage_database_bytes'] as const;
export type StorageMetric = (typeof STORAGE_METRICS)[number];
/** Flow metrics: summed over days and installs. */
export const TRAFFIC_METRICS = METRICS.filter(
  (m): m is Exclude<Metric, StorageMetric> => !m.startsWith('storage_'),
);
export const isStorage = (m: Metric) => m.startsWith('storage_');

export type Values = Record<Metric, string | null>;
export type Day = { date: string } & Values;

/** The largest int64. */
export const INT64_MAX = 9_223_372_036_854_775_807n;

/**
 * An ingested value as a decimal string: a non-negative safe integer, or a string of digits up to
 * int64. Larger numbers were already rounded by JSON parsing, so they must come as strings.
 * Returns the problem as a message, or the value.
 */
export function parseValue(value: unknown): { ok: string | null } | { problem: string } {
  if (value === null) return { ok: null };
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      return { problem: 'must be a non-negative integer; send values above 2^53 as a string of digits' };
    }
    return { ok: String(value) };
  }
  if (typeof value === 'string' && /^[0-9]{1,19}$/.test(value) && BigInt(value) <= INT64_MAX) {
    return { ok: BigInt(value).toString() };
  }
  return { problem: 'must be a non-negative int64: a number, or a string of digits' };
}

/** Mean per day, rounded half up: `sum / days` on exact integers. */
export function average(sum: bigint, days: number): bigint {
  const d = BigInt(days);
  return (2n * sum + d) / (2n * d);
}

/**
 * Days without storage figures take the last known ones (the platform's install usage series),
 * starting from `seed` (the last figures before the range). Days after `today` are not filled.
 * `days` is oldest first; so is the result.
 */
export function fillStorage(
  days: Day[],
  seed: Partial<Record<StorageMetric, string | null>>,
  today: string,
): Day[] {
  const last: Record<StorageMetric, string | null> = {
    storage_file_bytes: seed.storage_file_bytes ?? null,
    storage_database_bytes: seed.storage_database_bytes ?? null,
  };
  return days.map((day) => {
    if (day.date > today) return day;
    const filled = { ...day };
    for (const m of STORAGE_METRICS) {
      if (day[m] === null) filled[m] = last[m];
      else last[m] = day[m];
    }
    return filled;
  });
}

export interface Rollup {
  average: string | null;
  sum: string | null;
  latest: { date: string; value: string } | null;
}

/**
 * M6 for one install's days (oldest first): traffic metrics get `sum` (null without data) and
 * `average` per day with data; storage metrics get `latest`, the last day that has a value.
 */
export function rollupOf(days: Day[]): Record<Metric, Rollup> {
  const out = {} as Record<Metric, Rollup>;
  for (const m of METRICS) {
    const known = days.filter((d) => d[m] !== null);
    if (isStorage(m)) {
      const last = known.at(-1);
      out[m] = { average: null, sum: null, latest: last ? { date: last.date, value: last[m] ?? '0' } : null };
      continue;
    }
    const sum = known.reduce((s, d) => s + BigInt(d[m] ?? 0), 0n);
    out[m] = {
      average: known.length === 0 ? null : average(sum, known.length).toString(),
      sum: known.length === 0 ? null : sum.toString(),
      latest: null,
    };
  }
  return out;
}
