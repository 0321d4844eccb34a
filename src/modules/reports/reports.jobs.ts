import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { rescheduleAt } from '../../jobs/due.js';
import type { Outbox } from '../../mail/outbox.js';
import type { EventRecorder } from '../events/events.service.js';
import { DEFAULT_TEMPLATE, type SectionName, templateByUuid } from './catalogue.js';
import { renderReport } from './render.js';
import type { MetricValues, ScheduleRow } from './reports.repo.js';
import * as repo from './reports.repo.js';
import { dueKey, GENERATE_JOB } from './reports.service.js';
import { type Frequency, nextRun, previousRun } from './schedule.js';

export interface ReportJobsDeps {
  db: Db;
  clock: Clock;
  outbox: Pick<Outbox, 'add'>;
  /** PUBLIC_URL: the report's link in the mail (none without it). */
  publicUrl: string | null;
  /** Issue 22: `site_report.sent`, in the transaction that stores the report and queues its mail. */
  events?: EventRecorder;
}

const DAY_MS = 86_400_000;
const isoDate = (date: Date) => date.toISOString().slice(0, 10);
const EMPTY: MetricValues = {
  visit_count: null,
  billable_visits: null,
  network_origin_bytes: null,
  network_cdn_bytes: null,
  network_total_bytes: null,
  storage_file_bytes: null,
  storage_database_bytes: null,
  request_origin_count: null,
};

/**
 * The period a run covers: from the end of the schedule's last report (or one step of the rule
 * before a first run) to the run's date, as whole UTC days: [first, last] ends the day before.
 */
export function periodOf(frequency: Frequency, runAt: Date, lastEnd: Date | null) {
  const start = lastEnd && lastEnd.getTime() < runAt.getTime() ? lastEnd : previousRun(frequency, runAt);
  const firstDay = Date.parse(isoDate(start));
  const lastDay = Math.max(firstDay, Date.parse(isoDate(runAt)) - DAY_MS);
  const dates: string[] = [];
  for (let t = firstDay; t <= lastDay; t += DAY_MS) dates.push(isoDate(new Date(t)));
  return {
    start,
    end: runAt,
    dates,
    firstDate: dates[0] ?? isoDate(start),
    lastDate: dates.at(-1) ?? isoDate(start),
  };
}

/** The site report job: a due schedule's report, stored and mailed once (report + outbox, one transaction). */
export function createReportJobs({ db, clock, outbox, publicUrl, events }: ReportJobsDeps) {
  async function build(schedule: ScheduleRow, site: { id: string; name: string }, now: Date) {
    const frequency = { unit: schedule.frequency_unit, value: schedule.frequency_value };
    const runAt = schedule.next_run_at;
    const period = periodOf(frequency, runAt, await repo.lastPeriodEnd(db, schedule.id));
    const [daily, installs] = await Promise.all([
      repo.siteDailyUsage(db, site.id, period.firstDate, period.lastDate),
      repo.installUsage(db, site.id, period.firstDate, period.lastDate),
    ]);
    const byDate = new Map(daily.map((d) => [d.date, d]));
    const reportId = randomUUID();
    const doc = renderReport({
      title: schedule.title,
      site,
      template: templateByUuid(schedule.template_uuid) ?? DEFAULT_TEMPLATE,
      sections: schedule.sections as SectionName[],
      period: {
        start: period.start,
        end: period.end,
        firstDate: period.firstDate,
        lastDate: period.lastDate,
      },
      recipients: schedule.recipients,
      generatedAt: now,
      days: period.dates.map((date) => ({ ...EMPTY, ...byDate.get(date), date })),
      installs,
      downloadUrl: publicUrl ? `${publicUrl}/v1/site_reports/${reportId}/download` : null,
    });
    return { reportId, period, doc };
  }

  const generate: JobHandler<{ schedule_id: string }> = {
    async run({ schedule_id }) {
      const schedule = await repo.findSchedule(db, schedule_id);
      const now = clock.now();
      // Deleted, or moved to a later date since this run was queued: nothing is due.
      if (!schedule || schedule.next_run_at.getTime() > now.getTime()) return;
      const site = await repo.findSiteOf(db, schedule.site_id);
      if (!site) return;
      const { reportId, period, doc } = await build(schedule, site, now);
      await withTransaction(db, async (tx) => {
        const locked = await repo.lockSchedule(tx, schedule_id);
        // Edited or already run by another attempt meanwhile: that state wins.
        if (!locked || locked.next_run_at.getTime() !== schedule.next_run_at.getTime()) return;
        const inserted = await repo.insertReport(tx, {
          id: reportId,
          site_id: site.id,
          schedule_id,
          title: schedule.title,
          template_uuid: schedule.template_uuid,
          period_start: period.start,
          period_end: period.end,
          recipients: schedule.recipients,
          sections: schedule.sections,
          html: doc.html,
          created_at: now,
        });
        if (inserted) {
          await outbox.add(
            tx,
            schedule.recipients.map((r) => ({
              operation_id: null,
              event: 'site_report.generated',
              to: r.email,
              subject: doc.subject,
              text: doc.text,
              html: doc.html,
            })),
          );
          await events?.record(tx, {
            account_id: site.account_id,
            install_id: null,
            type: 'site_report.sent',
            resource: { type: 'site_report', id: reportId },
            data: {
              report_id: reportId,
              site_id: site.id,
              schedule_id,
              title: schedule.title,
              period_start: period.start.toISOString(),
              period_end: period.end.toISOString(),
              recipient_count: schedule.recipients.length,
            },
          });
        }
        // Runs missed while nothing ran are not caught up one by one: the next report covers them.
        const frequency = { unit: locked.frequency_unit, value: locked.frequency_value };
        const after = now.getTime() > locked.next_run_at.getTime() ? now : locked.next_run_at;
        const next = nextRun(frequency, locked.next_run_at, after);
        await repo.updateSchedule(tx, schedule_id, { next_run_at: next });
        await rescheduleAt(tx, dueKey(schedule_id), GENERATE_JOB, { schedule_id }, next);
      });
    },
    // Every attempt failed: the schedule keeps its date, and the sweeper's row is gone, so put it
    // back one day later (a persistent fault retries daily instead of stopping the schedule).
    async exhausted({ schedule_id }) {
      await withTransaction(db, async (tx) => {
        const locked = await repo.lockSchedule(tx, schedule_id);
        if (!locked) return;
        const retryAt = new Date(Math.max(clock.now().getTime(), locked.next_run_at.getTime()) + DAY_MS);
        await rescheduleAt(tx, dueKey(schedule_id), GENERATE_JOB, { schedule_id }, retryAt);
      });
    },
  };

  return { generate };
}
