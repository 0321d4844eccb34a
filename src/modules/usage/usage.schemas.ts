import { Type } from 'typebox';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

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

const Int64 = Nullable(
  Type.String({ pattern: '^[0-9]+$', description: 'int64 as a string; null when unknown' }),
);

export const DailyMetricsSchema = Type.Object({
  date: Type.String({ format: 'date' }),
  ...Object.fromEntries(METRICS.map((m) => [m, Int64])),
} as { date: ReturnType<typeof Type.String> } & Record<(typeof METRICS)[number], typeof Int64>);

/** GET /v1/installs/{install_id}/usage (M9). */
export const InstallUsageSchema = Type.Object({
  install_id: Uuid(),
  first_date: Type.String({ format: 'date' }),
  last_date: Type.String({ format: 'date' }),
  metrics: Type.Array(DailyMetricsSchema, { description: 'One entry per day, oldest first' }),
  storage_refresh_expected_time: Nullable(DateTime()),
  storage_update_time: Nullable(DateTime()),
});

export const UsageQuery = Type.Object({
  first_date: Type.Optional(Type.String({ format: 'date', description: 'YYYY-mm-dd, inclusive' })),
  last_date: Type.Optional(Type.String({ format: 'date', description: 'YYYY-mm-dd, inclusive' })),
});

export const InstallParams = Type.Object({ install_id: Uuid() });
export const AccountParams = Type.Object({ account_id: Uuid() });
