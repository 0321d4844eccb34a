import { type TSchema, Type } from 'typebox';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { METRICS, type Metric } from './usage-values.js';

export { METRICS } from './usage-values.js';

const perMetric = <T extends TSchema>(schema: T, description?: string) =>
  Type.Object(
    Object.fromEntries(METRICS.map((m) => [m, schema])) as Record<Metric, T>,
    description ? { description } : {},
  );

const Int64 = Nullable(
  Type.String({ pattern: '^[0-9]+$', description: 'int64 as a decimal string; null when no data' }),
);
const IsoDate = (description: string) => Type.String({ format: 'date', description });

/** One day of an install (DailyUsageMetrics). */
export const DailyMetricsSchema = Type.Object({
  date: IsoDate('The day (YYYY-mm-dd)'),
  ...perMetric(Int64).properties,
});

/** M6: UsageRollup. */
export const RollupSchema = Type.Object({
  average: Int64,
  sum: Int64,
  latest: Nullable(Type.Object({ date: IsoDate('The day of the value'), value: Type.String() })),
});
export const MetricsRollupSchema = perMetric(
  RollupSchema,
  'UsageMetricsRollup: traffic metrics have sum and average per day with data; storage metrics latest',
);

/** GET /v1/installs/{install_id}/usage (InstallDailyUsageMetricsSeries; M9). */
export const InstallUsageSchema = Type.Object({
  install_id: Uuid(),
  install_name: Type.String(),
  first_date: IsoDate('First day of the range'),
  last_date: IsoDate('Last day of the range'),
  metrics: Type.Array(DailyMetricsSchema, {
    description: 'One entry per day, most recent first; storage filled from the last known day',
  }),
  metrics_rollup: MetricsRollupSchema,
  storage_refresh_expected_time: Nullable(DateTime()),
  storage_update_time: Nullable(DateTime()),
});

/** M5: UsageMetricBreakdown. */
const BreakdownSchema = Type.Object({
  total: Int64,
  environment_types: Type.Object({ production: Int64, staging: Int64, development: Int64 }),
  site_types: Type.Object({ standard: Int64, transferable: Int64, sandbox: Int64 }),
});
export const InsightsSchema = perMetric(BreakdownSchema, 'AccountUsageInsights (M5)');

/** GET /v1/accounts/{account_id}/usage (AccountUsageMetricsResponse). */
export const AccountUsageSchema = Type.Object({
  first_date: IsoDate('First day of the range'),
  last_date: IsoDate('Last day of the range'),
  environment_metrics: Type.Array(
    Type.Object({
      install_id: Uuid(),
      environment_name: Type.String(),
      metrics: Type.Array(DailyMetricsSchema),
      metrics_rollup: MetricsRollupSchema,
      storage_refresh_expected_time: Nullable(DateTime()),
      storage_update_time: Nullable(DateTime()),
    }),
  ),
  total_size: Type.Integer({ description: 'How many environments the caller sees' }),
  next_page_token: Nullable(Type.String({ description: 'The `offset` of the next page' })),
  all_environments_included: Type.Boolean({
    description: 'false for partial members, who see only their installs',
  }),
  last_account_storage_refresh_time: Nullable(DateTime()),
  account_storage_refresh_expected_time: Nullable(DateTime()),
});

/** AccountLimits. */
export const LimitsSchema = Type.Object({
  visitors: Nullable(Type.Integer({ description: 'Maximum visitors a month; null: no limit' })),
  storage: Nullable(Type.Integer({ description: 'Maximum storage in GB; null: no limit' })),
  bandwidth: Nullable(Type.Integer({ description: 'Maximum bandwidth in GB a month; null: no limit' })),
});
// A type list, not anyOf: with coerceTypes, anyOf [integer, null] turns null into 0 (and [null, integer] 0 into null).
const LimitValue = Type.Unsafe<number | null>({
  type: ['integer', 'null'],
  minimum: 0,
  maximum: 1_000_000_000_000,
  description: 'null: no limit',
});
export const LimitsBody = Type.Object({ visitors: LimitValue, storage: LimitValue, bandwidth: LimitValue });

const DATE_PATTERN = '^\\d{4}-\\d{2}-\\d{2}$';
export const UsageQuery = Type.Object({
  first_date: Type.Optional(
    Type.String({ format: 'date', pattern: DATE_PATTERN, description: 'YYYY-mm-dd, inclusive' }),
  ),
  last_date: Type.Optional(
    Type.String({ format: 'date', pattern: DATE_PATTERN, description: 'YYYY-mm-dd, inclusive' }),
  ),
});
export const AccountUsageQuery = Type.Object({
  ...UsageQuery.properties,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  offset: Type.Optional(
    Type.String({ pattern: '^[0-9]{1,9}$', description: 'The next_page_token of the previous page' }),
  ),
});

/** An ingested value: validated by the service (a JSON number above 2^53 was already rounded). */
const IngestValue = Type.Optional(
  Type.Unknown({
    description: 'int64: a non-negative integer, a string of digits (needed above 2^53), or null',
  }),
);
export const MAX_INGEST_ROWS = 10_000;
export const IngestBody = Type.Object({
  rows: Type.Array(
    Type.Object({
      install_id: Uuid(),
      date: Type.String({ format: 'date', pattern: DATE_PATTERN }),
      ...(Object.fromEntries(METRICS.map((m) => [m, IngestValue])) as Record<Metric, typeof IngestValue>),
    }),
    { minItems: 1, maxItems: MAX_INGEST_ROWS },
  ),
});
export const IngestResultSchema = Type.Object({
  rows: Type.Integer({ description: 'Rows upserted (the same on a repeated call)' }),
});

export const InstallParams = Type.Object({ install_id: Uuid() });
export const AccountParams = Type.Object({ account_id: Uuid() });
