import { and, count, desc, eq, sql } from 'drizzle-orm';
import { type Db, queryRows, type RowOf } from '../../db/client.js';
import { installs, installUsageDaily, siteReportSchedules, siteReports, sites } from '../../db/schema.js';

const scheduleProjection = {
  id: siteReportSchedules.id,
  site_id: siteReportSchedules.site_id,
  title: siteReportSchedules.title,
  template_uuid: siteReportSchedules.template_uuid,
  frequency_unit: siteReportSchedules.frequency_unit,
  frequency_value: siteReportSchedules.frequency_value,
  next_run_at: siteReportSchedules.next_run_at,
  recipients: siteReportSchedules.recipients,
  sections: siteReportSchedules.sections,
  created_at: siteReportSchedules.created_at,
  updated_at: siteReportSchedules.updated_at,
};
export type ScheduleRow = RowOf<typeof scheduleProjection>;
export type NewSchedule = typeof siteReportSchedules.$inferInsert;

export async function insertSchedule(tx: Db, values: NewSchedule): Promise<string> {
  const [row] = await tx.insert(siteReportSchedules).values(values).returning({ id: siteReportSchedules.id });
  if (!row) throw new Error('insertSchedule returned nothing');
  return row.id;
}

export async function findSchedule(db: Db, id: string): Promise<ScheduleRow | null> {
  const [row] = await db
    .select(scheduleProjection)
    .from(siteReportSchedules)
    .where(eq(siteReportSchedules.id, id));
  return row ?? null;
}

/** Inside a transaction: the schedule, locked against a concurrent edit or run. */
export async function lockSchedule(tx: Db, id: string): Promise<ScheduleRow | null> {
  const [row] = await tx
    .select(scheduleProjection)
    .from(siteReportSchedules)
    .where(eq(siteReportSchedules.id, id))
    .for('update');
  return row ?? null;
}

export async function updateSchedule(tx: Db, id: string, values: Partial<NewSchedule>) {
  await tx.update(siteReportSchedules).set(values).where(eq(siteReportSchedules.id, id));
}

export async function deleteSchedule(tx: Db, id: string) {
  await tx.delete(siteReportSchedules).where(eq(siteReportSchedules.id, id));
}

export async function countSchedules(tx: Db, siteId: string): Promise<number> {
  const [row] = await tx
    .select({ n: count() })
    .from(siteReportSchedules)
    .where(eq(siteReportSchedules.site_id, siteId));
  return Number(row?.n ?? 0);
}

export function listSchedules(db: Db, siteId: string): Promise<ScheduleRow[]> {
  return db
    .select(scheduleProjection)
    .from(siteReportSchedules)
    .where(eq(siteReportSchedules.site_id, siteId))
    .orderBy(siteReportSchedules.created_at, siteReportSchedules.id);
}

/** The site a schedule reports on (its account is the site's: a transfer needs no change here). */
export async function findSiteOf(db: Db, siteId: string) {
  const [row] = await db
    .select({ id: sites.id, name: sites.name, account_id: sites.account_id })
    .from(sites)
    .where(eq(sites.id, siteId));
  return row ?? null;
}

const reportProjection = {
  id: siteReports.id,
  site_id: siteReports.site_id,
  schedule_id: siteReports.schedule_id,
  title: siteReports.title,
  period_start: siteReports.period_start,
  period_end: siteReports.period_end,
  recipients: siteReports.recipients,
  created_at: siteReports.created_at,
};
export type ReportRow = RowOf<typeof reportProjection>;

/** One report per schedule and period: a second insert of the same period adds nothing (null). */
export async function insertReport(tx: Db, values: typeof siteReports.$inferInsert): Promise<string | null> {
  const [row] = await tx
    .insert(siteReports)
    .values(values)
    .onConflictDoNothing()
    .returning({ id: siteReports.id });
  return row?.id ?? null;
}

/** The end of the schedule's latest report: where the next period starts. */
export async function lastPeriodEnd(db: Db, scheduleId: string): Promise<Date | null> {
  const [row] = await db
    .select({ end: siteReports.period_end })
    .from(siteReports)
    .where(eq(siteReports.schedule_id, scheduleId))
    .orderBy(desc(siteReports.period_end))
    .limit(1);
  return row?.end ?? null;
}

export function listReports(db: Db, siteId: string, limit: number): Promise<ReportRow[]> {
  return db
    .select(reportProjection)
    .from(siteReports)
    .where(eq(siteReports.site_id, siteId))
    .orderBy(desc(siteReports.created_at), desc(siteReports.id))
    .limit(limit);
}

export async function findReport(db: Db, id: string) {
  const [row] = await db
    .select({ ...reportProjection, html: siteReports.html })
    .from(siteReports)
    .where(and(eq(siteReports.id, id)));
  return row ?? null;
}

/** The eight metrics as exact decimal strings (bigint sums; no float on the way), or null. */
export interface MetricValues {
  visit_count: string | null;
  billable_visits: string | null;
  network_origin_bytes: string | null;
  network_cdn_bytes: string | null;
  network_total_bytes: string | null;
  storage_file_bytes: string | null;
  storage_database_bytes: string | null;
  request_origin_count: string | null;
}

const u = installUsageDaily;
const sums = sql`
  sum(${u.visit_count})::text as visit_count,
  sum(${u.billable_visits})::text as billable_visits,
  sum(${u.network_origin_bytes})::text as network_origin_bytes,
  sum(${u.network_cdn_bytes})::text as network_cdn_bytes,
  sum(${u.network_total_bytes})::text as network_total_bytes,
  sum(${u.storage_file_bytes})::text as storage_file_bytes,
  sum(${u.storage_database_bytes})::text as storage_database_bytes,
  sum(${u.request_origin_count})::text as request_origin_count`;

/** The site's usage per day over [first, last] (dates), summed over the installs it holds now. */
export function siteDailyUsage(db: Db, siteId: string, first: string, last: string) {
  return queryRows<MetricValues & { date: string }>(
    db,
    sql`select ${u.date}::text as date, ${sums}
        from ${u} join ${installs} on ${installs.id} = ${u.install_id}
        where ${installs.site_id} = ${siteId} and ${u.date} between ${first} and ${last}
        group by ${u.date} order by ${u.date}`,
  );
}

/**
 * Each install of the site with its totals over [first, last]; the storage metrics are the last
 * known figures of the period (storage is a level, not a flow).
 */
export function installUsage(db: Db, siteId: string, first: string, last: string) {
  return queryRows<MetricValues & { install_id: string; name: string; environment: string | null }>(
    db,
    sql`select i.id as install_id, i.name, i.environment,
          t.visit_count, t.billable_visits, t.network_origin_bytes, t.network_cdn_bytes,
          t.network_total_bytes, t.request_origin_count,
          (select d.storage_file_bytes::text from ${u} d
            where d.install_id = i.id and d.date between ${first} and ${last} and d.storage_file_bytes is not null
            order by d.date desc limit 1) as storage_file_bytes,
          (select d.storage_database_bytes::text from ${u} d
            where d.install_id = i.id and d.date between ${first} and ${last} and d.storage_database_bytes is not null
            order by d.date desc limit 1) as storage_database_bytes
        from ${installs} i
        left join lateral (select ${sums} from ${u} where ${u.install_id} = i.id and ${u.date} between ${first} and ${last}) t on true
        where i.site_id = ${siteId}
        order by i.environment nulls last, i.name`,
  );
}
