import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import { cancelDue, rescheduleAt } from '../../jobs/due.js';
import type { SitesService } from '../sites/sites.service.js';
import {
  DEFAULT_TEMPLATE,
  SECTIONS,
  type SectionName,
  TEMPLATES,
  type TemplateDef,
  templateByUuid,
} from './catalogue.js';
import * as repo from './reports.repo.js';
import { type Frequency, nextRun, startOfUtcDay } from './schedule.js';

/** Schedules one site may hold (bounded like every list). */
export const MAX_SCHEDULES_PER_SITE = 25;
/** Reports listed per site, newest first. */
export const REPORTS_LISTED = 100;

export const GENERATE_JOB = 'site-report-generate';
export const dueKey = (scheduleId: string) => `site-report:${scheduleId}`;

export interface ScheduleInput {
  title?: string;
  next_scheduled_date?: string;
  template_uuid?: string;
  frequency?: { value: number; unit: string };
  recipients?: { name?: string; email: string }[];
  sections?: { name: string }[];
}

export interface ReportsDeps {
  db: Db;
  clock: Clock;
  sites: Pick<SitesService, 'requireSite'>;
}

const DEFAULT_FREQUENCY: Frequency = { unit: 'MONTHLY', value: 1 };

function templateOf(uuid: string | undefined): TemplateDef {
  if (uuid === undefined) return DEFAULT_TEMPLATE;
  const template = templateByUuid(uuid);
  if (!template) {
    throw Errors.invalidValue('site_report_schedule', 'template_uuid', `Template ${uuid} does not exist`);
  }
  return template;
}

/** P3/P4 beyond the schema: DAYS takes 7 or 14 only. */
function frequencyOf(input: { value: number; unit: string }): Frequency {
  if (input.unit === 'DAYS' && input.value !== 7 && input.value !== 14) {
    throw Errors.invalidValue(
      'site_report_schedule',
      'frequency.value',
      `frequency.value must be 7 or 14 when unit is DAYS (got ${input.value})`,
    );
  }
  return { unit: input.unit as Frequency['unit'], value: input.value };
}

/** P5: every name must be a section of the template, once; mandatory sections are always in. */
function sectionsOf(template: TemplateDef, input: { name: string }[] | undefined): SectionName[] {
  const names = input?.map((s) => s.name) ?? [...template.sections];
  const invalid = names.filter((n) => !template.sections.includes(n as SectionName));
  if (invalid.length > 0) {
    throw Errors.invalidValue(
      'site_report_schedule',
      'sections',
      `Section(s) ${invalid.map((n) => `"${n}"`).join(', ')} not valid for template "${template.template_name}"; valid: ${template.sections.join(', ')}`,
      'invalid_section',
    );
  }
  if (new Set(names).size !== names.length) {
    throw Errors.invalidValue(
      'site_report_schedule',
      'sections',
      'A section is listed more than once',
      'duplicate',
    );
  }
  const mandatory = SECTIONS.filter((s) => s.mandatory && template.sections.includes(s.name)).map(
    (s) => s.name,
  );
  const chosen = new Set([...mandatory, ...names] as SectionName[]);
  return template.sections.filter((n) => chosen.has(n));
}

function recipientsOf(input: { name?: string; email: string }[]) {
  const emails = input.map((r) => r.email.trim().toLowerCase());
  if (new Set(emails).size !== emails.length) {
    throw Errors.invalidValue(
      'site_report_schedule',
      'recipients',
      'A recipient e-mail is listed more than once',
      'duplicate',
    );
  }
  return input.map((r) => ({ name: r.name?.trim() || null, email: r.email.trim() }));
}

function dateOf(value: string, now: Date): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) {
    throw Errors.invalidValue('site_report_schedule', 'next_scheduled_date', `Invalid date-time ${value}`);
  }
  if (date.getTime() <= now.getTime()) {
    throw Errors.invalidValue(
      'site_report_schedule',
      'next_scheduled_date',
      `next_scheduled_date ${value} is not in the future`,
      'in_the_past',
    );
  }
  return date;
}

export function toSchedule(row: repo.ScheduleRow) {
  return {
    uuid: row.id,
    site_id: row.site_id,
    title: row.title,
    template_uuid: row.template_uuid,
    next_scheduled_date: row.next_run_at.toISOString(),
    frequency: { value: row.frequency_value, unit: row.frequency_unit },
    recipients: row.recipients,
    sections: row.sections.map((name) => ({ name })),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function createReportsService({ db, clock, sites }: ReportsDeps) {
  /** The schedule if the caller may act on its site (404 for a foreign or unknown one). */
  async function requireSchedule(caller: Caller, id: string, action: 'reports:read' | 'reports:manage') {
    const schedule = await repo.findSchedule(db, id);
    if (!schedule) throw Errors.notFound();
    await sites.requireSite(caller, schedule.site_id, action);
    return schedule;
  }

  return {
    /** P6: the built-in templates; account_id is required and must be the caller's. */
    templates(caller: Caller, accountId: string) {
      requireAccount(caller, accountId, 'account:read');
      return TEMPLATES;
    },

    sections: () => SECTIONS,

    /** P1 (P3-P5 checked): the schedule and its due row in one transaction. */
    async create(
      caller: Caller,
      input: ScheduleInput & {
        site_id: string;
        title: string;
        recipients: { name?: string; email: string }[];
      },
    ) {
      await sites.requireSite(caller, input.site_id, 'reports:manage');
      const now = clock.now();
      const template = templateOf(input.template_uuid);
      const frequency = input.frequency ? frequencyOf(input.frequency) : DEFAULT_FREQUENCY;
      const values = {
        site_id: input.site_id,
        title: input.title.trim(),
        template_uuid: template.template_uuid,
        frequency_unit: frequency.unit,
        frequency_value: frequency.value,
        next_run_at: input.next_scheduled_date
          ? dateOf(input.next_scheduled_date, now)
          : nextRun(frequency, startOfUtcDay(now), now),
        recipients: recipientsOf(input.recipients),
        sections: sectionsOf(template, input.sections),
        created_at: now,
        updated_at: now,
      };
      return withTransaction(db, async (tx) => {
        if ((await repo.countSchedules(tx, input.site_id)) >= MAX_SCHEDULES_PER_SITE) {
          throw Errors.invalidValue(
            'site_report_schedule',
            'site_id',
            `Site ${input.site_id} already has ${MAX_SCHEDULES_PER_SITE} report schedules`,
            'limit_reached',
          );
        }
        const id = await repo.insertSchedule(tx, values);
        await rescheduleAt(tx, dueKey(id), GENERATE_JOB, { schedule_id: id }, values.next_run_at);
        return id;
      });
    },

    /**
     * P2: any field but site_id. A new next_scheduled_date moves the next run; a new MONTHLY day
     * moves it to that day's next occurrence; DAYS keeps the scheduled date (and so its weekday).
     */
    async update(caller: Caller, id: string, input: ScheduleInput) {
      await requireSchedule(caller, id, 'reports:manage');
      const now = clock.now();
      await withTransaction(db, async (tx) => {
        const current = await repo.lockSchedule(tx, id);
        if (!current) throw Errors.notFound();
        const template = templateOf(input.template_uuid ?? current.template_uuid);
        const templateChanged = template.template_uuid !== current.template_uuid;
        const frequency = input.frequency
          ? frequencyOf(input.frequency)
          : { unit: current.frequency_unit, value: current.frequency_value };
        const sections = input.sections
          ? sectionsOf(template, input.sections)
          : templateChanged
            ? sectionsOf(template, undefined)
            : current.sections;
        let next = current.next_run_at;
        if (input.next_scheduled_date) next = dateOf(input.next_scheduled_date, now);
        else if (
          frequency.unit === 'MONTHLY' &&
          (frequency.unit !== current.frequency_unit || frequency.value !== current.frequency_value)
        ) {
          next = nextRun(frequency, current.next_run_at, now);
        }
        await repo.updateSchedule(tx, id, {
          ...(input.title !== undefined && { title: input.title.trim() }),
          ...(input.recipients !== undefined && { recipients: recipientsOf(input.recipients) }),
          template_uuid: template.template_uuid,
          frequency_unit: frequency.unit,
          frequency_value: frequency.value,
          sections,
          next_run_at: next,
          updated_at: now,
        });
        if (next.getTime() !== current.next_run_at.getTime()) {
          await rescheduleAt(tx, dueKey(id), GENERATE_JOB, { schedule_id: id }, next);
        }
      });
    },

    /** P6: the schedule and its pending run go; reports already generated stay listed. */
    async remove(caller: Caller, id: string) {
      await requireSchedule(caller, id, 'reports:manage');
      await withTransaction(db, async (tx) => {
        await repo.deleteSchedule(tx, id);
        await cancelDue(tx, dueKey(id));
      });
    },

    /** P6: the schedules of a site. */
    async listSchedules(caller: Caller, siteId: string) {
      await sites.requireSite(caller, siteId, 'reports:read');
      return repo.listSchedules(db, siteId);
    },

    /** The generated reports of a site, newest first. */
    async listReports(caller: Caller, siteId: string) {
      await sites.requireSite(caller, siteId, 'reports:read');
      return repo.listReports(db, siteId, REPORTS_LISTED);
    },

    /** A report's HTML document, for a caller who may read the site's reports now. */
    async document(caller: Caller, reportId: string) {
      const report = await repo.findReport(db, reportId);
      if (!report) throw Errors.notFound();
      await sites.requireSite(caller, report.site_id, 'reports:read');
      return report;
    },
  };
}

export type ReportsService = ReturnType<typeof createReportsService>;
