import { callerOf } from '../../http/auth.js';
import { baseUrl } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { previewImage, SECTIONS, TEMPLATES } from './catalogue.js';
import {
  AccountQuery,
  CreateScheduleBody,
  MessageSchema,
  ReportDocument,
  ReportList,
  ReportParams,
  ScheduleList,
  ScheduleParams,
  SectionsSchema,
  SiteQuery,
  TemplateList,
  UpdateScheduleBody,
} from './reports.schemas.js';
import { toSchedule } from './reports.service.js';

/** Previews are fixed: made once, not per request. */
const TEMPLATE_PREVIEWS = new Map(
  TEMPLATES.map((t) => [t.template_uuid, previewImage(t.template_name, [...t.sections], t.brand_colour)]),
);
const SECTION_PREVIEWS = new Map(SECTIONS.map((s) => [s.name, previewImage(s.display_text, [s.summary])]));

/** The served document may not load anything (it has none to load) nor run script. */
const DOCUMENT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

export function reportsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Site Reports'];
    const routeConfig = { resource: 'site_report_schedule' };

    app.get(
      '/site_reports/templates',
      {
        schema: {
          operationId: 'listSiteReportTemplates',
          tags,
          summary: 'List report templates (P6; account_id required)',
          querystring: AccountQuery,
          response: { 200: TemplateList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => ({
        templates: services.reports.templates(callerOf(request), request.query.account_id).map((t) => ({
          template_uuid: t.template_uuid,
          template_name: t.template_name,
          description: t.description,
          company_name: t.company_name,
          brand_colour: t.brand_colour,
          preview_image_url: TEMPLATE_PREVIEWS.get(t.template_uuid) ?? '',
          sections: t.sections.map((name) => ({ name })),
          created_at: t.created_at,
          updated_at: t.updated_at,
        })),
      }),
    );

    app.get(
      '/site_reports/sections',
      {
        schema: {
          operationId: 'getSiteReportsSections',
          tags,
          summary: 'List the sections a site report can hold',
          response: { 200: SectionsSchema, ...errorResponses() },
        },
        config: routeConfig,
      },
      async (request) => ({
        name: 'siteReport',
        resource_type: 'site',
        sections: services.reports.sections().map((s) => ({
          name: s.name,
          display_text: s.display_text,
          order: s.order,
          image_url: SECTION_PREVIEWS.get(s.name) ?? '',
          footer_url: `${baseUrl(request, config.publicUrl)}/v1/sites/{site_id}`,
          group_name: s.group_name,
          group_display_text: s.group_display_text,
          mandatory: s.mandatory,
        })),
      }),
    );

    app.get(
      '/site_reports/schedules',
      {
        schema: {
          operationId: 'getSiteReportsSchedules',
          tags,
          summary: 'List the report schedules of a site (P6)',
          querystring: SiteQuery,
          response: { 200: ScheduleList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => ({
        schedules: (await services.reports.listSchedules(callerOf(request), request.query.site_id)).map(
          toSchedule,
        ),
      }),
    );

    app.post(
      '/site_reports/schedules',
      {
        schema: {
          operationId: 'createSiteReportSchedule',
          tags,
          summary: 'Create a report schedule (P1, P3-P5)',
          body: CreateScheduleBody,
          response: { 201: MessageSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        await services.reports.create(callerOf(request), request.body);
        return reply.status(201).send({ message: 'Report schedule created' });
      },
    );

    app.patch(
      '/site_reports/schedules/:schedule_id',
      {
        schema: {
          operationId: 'updateSiteReportSchedule',
          tags,
          summary: 'Change a report schedule (P2-P5)',
          params: ScheduleParams,
          body: UpdateScheduleBody,
          response: { 200: MessageSchema, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config: routeConfig,
      },
      async (request) => {
        await services.reports.update(callerOf(request), request.params.schedule_id, request.body);
        return { message: 'Report schedule updated' };
      },
    );

    app.delete(
      '/site_reports/schedules/:schedule_id',
      {
        schema: {
          operationId: 'deleteSiteReportSchedule',
          tags,
          summary: 'Delete a report schedule (P6)',
          params: ScheduleParams,
          response: { 200: MessageSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        await services.reports.remove(callerOf(request), request.params.schedule_id);
        return { message: 'Deleted' };
      },
    );

    app.get(
      '/site_reports',
      {
        schema: {
          operationId: 'getSiteReports',
          tags,
          summary: 'List the generated reports of a site, newest first',
          querystring: SiteQuery,
          response: { 200: ReportList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const base = baseUrl(request, config.publicUrl);
        const rows = await services.reports.listReports(callerOf(request), request.query.site_id);
        return {
          reports: rows.map((r) => ({
            uuid: r.id,
            title: r.title,
            date_range: { start_date: r.period_start.toISOString(), end_date: r.period_end.toISOString() },
            created_at: r.created_at.toISOString(),
            recipients: r.recipients.map((x) => ({ email: x.email })),
            download_url: `${base}/v1/site_reports/${r.id}/download`,
          })),
        };
      },
    );

    app.get(
      '/site_reports/:report_id/download',
      {
        schema: {
          operationId: 'downloadSiteReport',
          tags,
          summary: 'The report document (HTML with inline SVG charts)',
          params: ReportParams,
          response: {
            200: { description: 'The report', content: { 'text/html': { schema: ReportDocument } } },
            ...errorResponses(400, 403, 404),
          },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const report = await services.reports.document(callerOf(request), request.params.report_id);
        return reply
          .type('text/html; charset=utf-8')
          .header('content-security-policy', DOCUMENT_CSP)
          .header('content-disposition', `inline; filename="site-report-${report.id}.html"`)
          .send(report.html);
      },
    );
  };
}
