import { eq, type SQL, sql } from 'drizzle-orm';
import { type Db, queryRows } from '../../db/client.js';
import { accountLimits, installs, installUsageDaily, operations, sites } from '../../db/schema.js';
import { type Scope, scopeWhere } from './usage.repo.js';
import type { Limits } from './usage-limits.js';
import { type Metric, STORAGE_METRICS, TRAFFIC_METRICS } from './usage-values.js';

/**
 * Account-wide usage (M5, M6) in one statement each. Usage rows carry no account_id (a transfer moves
 * an install with its history): the account's installs are the driving side, and each install's days
 * are one range scan of the (install_id, date) primary key. Sums run in SQL over bigint (numeric, so
 * exact above 2^53) and come back as text. bench/README.md ("Usage") has the plans and timings.
 */

const col = (m: string) => sql.raw(m);

/** The account's installs the caller sees, with their environment and site type. */
function scopeCte(scope: Scope): SQL {
  return sql`scope as (
    select i.id, i.environment,
      case when s.sandbox then 'sandbox' when s.transferable then 'transferable' else 'standard' end
        as site_type
    from ${installs} i left join ${sites} s on s.id = i.site_id
    where ${scopeWhere(scope)}
  )`;
}

/** Each install's last known value of each storage metric on or before `last` (a backward probe). */
function storageLaterals(last: string): SQL {
  return sql.join(
    STORAGE_METRICS.map(
      (m) => sql`left join lateral (
        select u.${col(m)} as v, u.date from ${installUsageDaily} u
        where u.install_id = sc.id and u.date <= ${last}::date and u.${col(m)} is not null
        order by u.date desc limit 1
      ) ${col(`l_${m}`)} on true`,
    ),
    sql` `,
  );
}

export type InsightRow = {
  g_env: number;
  g_site: number;
  environment: string | null;
  site_type: string;
} & Record<Metric, string | null>;

/**
 * M5: per metric the total, by environment type and by site type (GROUPING SETS). Traffic metrics are
 * summed over the range; storage metrics are each install's latest figure (on or before last_date),
 * summed over installs. A sum over no values is null.
 */
export function insights(db: Db, scope: Scope, first: string, last: string): Promise<InsightRow[]> {
  return queryRows<InsightRow>(db, insightsQuery(scope, first, last));
}

/** The statement of {@link insights} (bench/usage.bench.ts explains it). */
export function insightsQuery(scope: Scope, first: string, last: string): SQL {
  const trafficSums = TRAFFIC_METRICS.map((m) => sql`sum(u.${col(m)}) as ${col(m)}`);
  const outer = [
    ...TRAFFIC_METRICS.map((m) => sql`sum(t.${col(m)})::text as ${col(m)}`),
    ...STORAGE_METRICS.map((m) => sql`sum(${col(`l_${m}`)}.v)::text as ${col(m)}`),
  ];
  return sql`with ${scopeCte(scope)},
      traffic as (
        select u.install_id, ${sql.join(trafficSums, sql`, `)}
        from ${installUsageDaily} u join scope on scope.id = u.install_id
        where u.date between ${first}::date and ${last}::date
        group by u.install_id
      )
      select grouping(sc.environment)::int as g_env, grouping(sc.site_type)::int as g_site,
        sc.environment, sc.site_type, ${sql.join(outer, sql`, `)}
      from scope sc left join traffic t on t.install_id = sc.id
      ${storageLaterals(last)}
      group by grouping sets ((), (sc.environment), (sc.site_type))`;
}

export type SummaryRow = Record<string, string | number | null>;

/**
 * M6: traffic metrics as per-day totals first (so `<m>_days` counts the days that have data), then
 * their sum; storage metrics as the sum of each install's latest figure and the latest such date.
 */
export async function summary(db: Db, scope: Scope, first: string, last: string): Promise<SummaryRow> {
  const [row] = await queryRows<SummaryRow>(db, summaryQuery(scope, first, last));
  return row ?? {};
}

/** The statement of {@link summary} (bench/usage.bench.ts explains it). */
export function summaryQuery(scope: Scope, first: string, last: string): SQL {
  const daily = TRAFFIC_METRICS.map((m) => sql`sum(u.${col(m)}) as ${col(m)}`);
  const traffic = TRAFFIC_METRICS.map(
    (m) => sql`(select sum(${col(m)})::text from daily) as ${col(`${m}_sum`)},
      (select count(${col(m)})::int from daily) as ${col(`${m}_days`)}`,
  );
  const storage = STORAGE_METRICS.map(
    (m) => sql`sum(${col(`l_${m}`)}.v)::text as ${col(`${m}_latest`)},
      max(${col(`l_${m}`)}.date)::text as ${col(`${m}_date`)}`,
  );
  return sql`with ${scopeCte(scope)},
      daily as (
        select u.date, ${sql.join(daily, sql`, `)}
        from ${installUsageDaily} u join scope on scope.id = u.install_id
        where u.date between ${first}::date and ${last}::date
        group by u.date
      )
      select ${sql.join(traffic, sql`, `)}, ${sql.join(storage, sql`, `)}
      from scope sc ${storageLaterals(last)}`;
}

export interface InstallRef {
  id: string;
  name: string;
}

/** A page of the scope's installs (oldest first) and how many there are. */
export async function pageOfInstalls(db: Db, scope: Scope, limit: number, offset: number) {
  const rows = await queryRows<InstallRef>(
    db,
    sql`select i.id, i.name from ${installs} i where ${scopeWhere(scope)}
      order by i.created_at, i.id limit ${limit} offset ${offset}`,
  );
  const [total] = await queryRows<{ n: number }>(
    db,
    sql`select count(*)::int as n from ${installs} i where ${scopeWhere(scope)}`,
  );
  return { rows, total: Number(total?.n ?? 0) };
}

export interface RefreshTimes {
  install_id: string | null;
  /** Whether a recalculation is queued or running, and when the last of those is expected. */
  pending: boolean;
  expected_at: Date | null;
  completed_at: Date | null;
}

/**
 * Disk refreshes (M9) of the scope's installs: per install when `byInstall`, else one row for the
 * whole scope (the account's refresh times).
 */
export async function refreshTimes(
  db: Db,
  scope: Scope,
  byInstall: string[] | null,
): Promise<RefreshTimes[]> {
  const filter = byInstall ? sql`and o.install_id = any(${sql.param(byInstall)}::uuid[])` : sql``;
  const group = byInstall ? sql`group by o.install_id` : sql``;
  const rows = await queryRows<{
    install_id: string | null;
    pending: boolean | null;
    expected_at: string | Date | null;
    completed_at: string | Date | null;
  }>(
    db,
    sql`select ${byInstall ? sql`o.install_id` : sql`null::uuid`} as install_id,
        coalesce(bool_or(o.status in ('queued', 'in_progress')), false) as pending,
        max(o.expected_at) filter (where o.status in ('queued', 'in_progress')) as expected_at,
        max(o.completed_at) filter (where o.status = 'completed') as completed_at
      from ${operations} o join ${installs} i on i.id = o.install_id
      where ${scopeWhere(scope)} and o.type = 'refresh_disk_usage' ${filter}
      ${group}`,
  );
  const at = (v: string | Date | null) => (v === null ? null : new Date(v));
  return rows.map((r) => ({
    install_id: r.install_id,
    pending: Boolean(r.pending),
    expected_at: at(r.expected_at),
    completed_at: at(r.completed_at),
  }));
}

/** An operator's limits of the account, or null (the plan's apply). */
export async function limitsOverride(db: Db, accountId: string): Promise<Limits | null> {
  const [row] = await db
    .select({
      visitors: accountLimits.visitors,
      storage: accountLimits.storage,
      bandwidth: accountLimits.bandwidth,
    })
    .from(accountLimits)
    .where(eq(accountLimits.account_id, accountId));
  return row ?? null;
}

export async function putLimitsOverride(db: Db, accountId: string, limits: Limits, now: Date) {
  await db
    .insert(accountLimits)
    .values({ account_id: accountId, ...limits, updated_at: now })
    .onConflictDoUpdate({ target: accountLimits.account_id, set: { ...limits, updated_at: now } });
}

export async function deleteLimitsOverride(db: Db, accountId: string) {
  await db.delete(accountLimits).where(eq(accountLimits.account_id, accountId));
}
