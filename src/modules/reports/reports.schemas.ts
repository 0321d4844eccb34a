import { Type } from 'typebox';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { SECTION_NAMES } from './catalogue.js';

/** Recipients of one schedule: at least one, at most this many. */
export const MAX_RECIPIENTS = 20;

export const SiteQuery = Type.Object({ site_id: Uuid({ description: 'The site' }) });
export const AccountQuery = Type.Object({ account_id: Uuid({ description: 'The account (required)' }) });
export const ScheduleParams = Type.Object({ schedule_id: Uuid({ description: 'The schedule (its uuid)' }) });
export const ReportParams = Type.Object({ report_id: Uuid({ description: 'The report (its uuid)' }) });

const Frequency = Type.Object(
  {
    value: Type.Integer({
      minimum: 1,
      maximum: 31,
      description: 'DAYS: 7 or 14 (P3); MONTHLY: day 1-31 (P4)',
    }),
    unit: Type.String({ enum: ['DAYS', 'MONTHLY'] }),
  },
  { description: 'How often the report runs' },
);
const Recipient = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 100 })),
  email: Type.String({ format: 'email', minLength: 3, maxLength: 254 }),
});
const Section = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 50, description: 'A section the template allows (P5)' }),
});

const fields = {
  title: Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' }),
  next_scheduled_date: Type.String({
    format: 'date-time',
    maxLength: 40,
    description: 'ISO 8601 datetime of the first (create) or next (update) generation; not in the past',
  }),
  template_uuid: Uuid({ description: 'Report template (default: Site Report)' }),
  frequency: Frequency,
  recipients: Type.Array(Recipient, { minItems: 1, maxItems: MAX_RECIPIENTS }),
  sections: Type.Array(Section, { minItems: 1, maxItems: SECTION_NAMES.length }),
};

/** P1: site_id, title and recipients are required. */
export const CreateScheduleBody = Type.Object({
  site_id: Uuid({ description: 'The site to report on' }),
  title: fields.title,
  recipients: fields.recipients,
  next_scheduled_date: Type.Optional(fields.next_scheduled_date),
  template_uuid: Type.Optional(fields.template_uuid),
  frequency: Type.Optional(fields.frequency),
  sections: Type.Optional(fields.sections),
});

/** P2: the same fields but site_id, all optional. */
export const UpdateScheduleBody = Type.Object({
  title: Type.Optional(fields.title),
  recipients: Type.Optional(fields.recipients),
  next_scheduled_date: Type.Optional(fields.next_scheduled_date),
  template_uuid: Type.Optional(fields.template_uuid),
  frequency: Type.Optional(fields.frequency),
  sections: Type.Optional(fields.sections),
});

export const MessageSchema = Type.Object({ message: Type.String() });

export const ScheduleSchema = Type.Object({
  uuid: Uuid({ description: 'The schedule id (the {schedule_id} of update and delete)' }),
  site_id: Uuid(),
  title: Type.String(),
  template_uuid: Uuid(),
  next_scheduled_date: DateTime(),
  frequency: Frequency,
  recipients: Type.Array(Type.Object({ name: Nullable(Type.String()), email: Type.String() })),
  sections: Type.Array(Type.Object({ name: Type.String() })),
  created_at: DateTime(),
  updated_at: DateTime(),
});
export const ScheduleList = Type.Object({ schedules: Type.Array(ScheduleSchema) });

export const ReportSchema = Type.Object({
  uuid: Uuid(),
  title: Type.String(),
  date_range: Type.Object({ start_date: DateTime(), end_date: DateTime() }),
  created_at: DateTime(),
  recipients: Type.Array(Type.Object({ email: Type.String() })),
  download_url: Type.String({
    format: 'uri',
    description: 'The HTML document (Basic auth, like every /v1 route)',
  }),
});
export const ReportList = Type.Object({ reports: Type.Array(ReportSchema) });

export const TemplateSchema = Type.Object({
  template_uuid: Uuid(),
  template_name: Type.String({ maxLength: 100 }),
  description: Type.String(),
  company_name: Type.String(),
  brand_colour: Type.String(),
  preview_image_url: Type.String({ format: 'uri', description: 'An inline SVG (data: URI)' }),
  sections: Type.Array(Type.Object({ name: Type.String() })),
  created_at: DateTime(),
  updated_at: DateTime(),
});
export const TemplateList = Type.Object({ templates: Type.Array(TemplateSchema) });

export const SectionsSchema = Type.Object({
  name: Type.String(),
  resource_type: Type.String(),
  sections: Type.Array(
    Type.Object({
      name: Type.String(),
      display_text: Type.String(),
      order: Type.Integer(),
      image_url: Type.String({ format: 'uri', description: 'An inline SVG preview (data: URI)' }),
      footer_url: Type.String({ format: 'uri', description: 'The site in this API ({site_id} to fill in)' }),
      group_name: Type.String(),
      group_display_text: Type.String(),
      mandatory: Type.Boolean(),
    }),
  ),
});

export const ReportDocument = Type.String({ description: 'The report: a self-contained HTML document' });
