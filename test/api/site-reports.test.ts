import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { header, mailOf, smtpCapture } from '../support/jobs.js';
import {
  createSchedule,
  deleteSchedules,
  reportsOf,
  runReportJobs,
  scheduleOf,
  seedUsage,
  uniqueTitle,
} from '../support/reports.js';

// A real SMTP server on a local port: generated reports are delivered to it (SMTP_URL).
const smtp = await smtpCapture();
after(() => smtp.close());
const t = await buildTestApp({ env: { SMTP_URL: smtp.url, MAIL_FROM: 'Reports <reports@hostplane.test>' } });
const f = factories(t);

const SITE_REPORT = '5c1f0e2a-7b7d-4f3e-9a51-0d7c3f8e2b01';
const STORAGE_REPORT = '5c1f0e2a-7b7d-4f3e-9a51-0d7c3f8e2b03';
const at = (iso: string) => new Date(iso);
const mailbox = () => `r${randomUUID().slice(0, 8)}@example.test`;
const deliveredTo = (address: string) => smtp.received.filter((m) => m.to.includes(address));

/** Undoes quoted-printable soft breaks and escapes, so a body can be searched. */
const unQuote = (raw: string) =>
  raw
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

/** Sets the clock to `iso` and runs the report and mail jobs that became due. */
async function runAt(iso: string) {
  t.clock.set(at(iso));
  await runReportJobs(t);
}

const badRequest = (res: Json, field: string) => {
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.ok(
    res.body.errors.some((e: Json) => e.field === field),
    `a field error on ${field}: ${JSON.stringify(res.body)}`,
  );
};

describe('templates and sections (P5, P6)', () => {
  it('P6 listSiteReportTemplates lists the built-in templates with the sections each allows', async () => {
    const w = await f.world();
    const res = await w.owner.client.get(`/v1/site_reports/templates?account_id=${w.account.id}`);
    assert.equal(res.status, 200);
    const names = res.body.templates.map((x: Json) => x.template_name);
    assert.deepEqual(names, ['Site Report', 'Traffic Report', 'Storage Report']);
    const site = res.body.templates[0];
    assert.equal(site.template_uuid, SITE_REPORT);
    assert.deepEqual(
      site.sections.map((s: Json) => s.name),
      ['cover', 'overview', 'visits', 'bandwidth', 'requests', 'storage', 'environments', 'usage'],
    );
    assert.match(site.preview_image_url, /^data:image\/svg\+xml;base64,/);
    assert.match(site.brand_colour, /^#[0-9A-F]{6}$/i);
  });

  it('P6 account_id is required (400), and a foreign or unknown account is 404', async () => {
    const w = await f.world();
    badRequest(await w.owner.client.get('/v1/site_reports/templates'), 'account_id');
    const other = await f.world();
    assert.equal(
      (await w.owner.client.get(`/v1/site_reports/templates?account_id=${other.account.id}`)).status,
      404,
    );
    assert.equal(
      (await w.owner.client.get(`/v1/site_reports/templates?account_id=${randomUUID()}`)).status,
      404,
    );
  });

  it('getSiteReportsSections lists every section in order, with its group and whether it is mandatory', async () => {
    const w = await f.world();
    const res = await w.owner.client.get('/v1/site_reports/sections');
    assert.equal(res.status, 200);
    assert.equal(res.body.name, 'siteReport');
    assert.equal(res.body.resource_type, 'site');
    const cover = res.body.sections[0];
    assert.deepEqual(Object.keys(cover).sort(), [
      'display_text',
      'footer_url',
      'group_display_text',
      'group_name',
      'image_url',
      'mandatory',
      'name',
      'order',
    ]);
    assert.equal(cover.name, 'cover');
    assert.equal(cover.mandatory, true);
    assert.deepEqual(
      res.body.sections.map((s: Json) => s.order),
      res.body.sections.map((_: Json, i: number) => i + 1),
    );
  });
});

describe('report schedules (P1-P6)', () => {
  // These tests check input only: their schedules are deleted after each (deleteSchedules).
  const worlds: Json[] = [];
  const inputWorld = async () => {
    const w = await f.world();
    worlds.push(w);
    return w;
  };
  afterEach(async () => {
    for (const w of worlds.splice(0)) await deleteSchedules(w.owner.client, w.site.id);
  });

  it('P1 site_id, title and recipients are required: a field error each; 201 answers a message only', async () => {
    const w = await inputWorld();
    const res = await w.owner.client.post('/v1/site_reports/schedules', {});
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors.map((e: Json) => e.field).sort(), ['recipients', 'site_id', 'title']);
    const ok = await w.owner.client.post('/v1/site_reports/schedules', {
      site_id: w.site.id,
      title: uniqueTitle(),
      recipients: [{ email: mailbox() }],
    });
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body, { message: 'Report schedule created' });
  });

  it('P1 every recipient needs a valid email; no recipients, too many or a repeated one is a 400', async () => {
    const w = await inputWorld();
    const body = (recipients: unknown) => ({ site_id: w.site.id, title: uniqueTitle(), recipients });
    const post = (b: unknown) => w.owner.client.post('/v1/site_reports/schedules', b);
    badRequest(await post(body([{ name: 'No mail' }])), 'recipients[0].email');
    badRequest(await post(body([{ email: 'not-an-address' }])), 'recipients[0].email');
    badRequest(await post(body([])), 'recipients');
    badRequest(await post(body(Array.from({ length: 21 }, () => ({ email: mailbox() })))), 'recipients');
    badRequest(await post(body([{ email: 'a@example.test' }, { email: 'A@example.test' }])), 'recipients');
    assert.equal((await post(body(Array.from({ length: 20 }, () => ({ email: mailbox() }))))).status, 201);
  });

  it('P6 lists the schedules of a site with their uuid and every field; defaults filled in', async () => {
    const w = await inputWorld();
    t.clock.set(at('2026-12-10T12:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ name: 'Ada', email: 'ada@example.test' }],
    });
    assert.match(s.uuid, /^[0-9a-f-]{36}$/);
    assert.equal(s.site_id, w.site.id);
    assert.equal(s.template_uuid, SITE_REPORT);
    assert.deepEqual(s.frequency, { value: 1, unit: 'MONTHLY' });
    assert.equal(s.next_scheduled_date, '2027-01-01T00:00:00.000Z', 'MONTHLY 1: the next 1st, midnight UTC');
    assert.deepEqual(s.recipients, [{ name: 'Ada', email: 'ada@example.test' }]);
    assert.equal(s.sections.length, 8, 'every section of the template');
    const other = await inputWorld();
    const list = await other.owner.client.get(`/v1/site_reports/schedules?site_id=${other.site.id}`);
    assert.deepEqual(list.body, { schedules: [] });
    badRequest(await w.owner.client.get('/v1/site_reports/schedules'), 'site_id');
  });

  it('P3 DAYS takes 7 or 14 only; MONTHLY takes 1 to 31', async () => {
    const w = await inputWorld();
    const post = (frequency: unknown) =>
      w.owner.client.post('/v1/site_reports/schedules', {
        site_id: w.site.id,
        title: uniqueTitle(),
        recipients: [{ email: mailbox() }],
        frequency,
      });
    for (const value of [1, 5, 13, 15, 28, 31])
      badRequest(await post({ unit: 'DAYS', value }), 'frequency.value');
    for (const value of [0, 32]) badRequest(await post({ unit: 'MONTHLY', value }), 'frequency.value');
    badRequest(await post({ unit: 'WEEKLY', value: 7 }), 'frequency.unit');
    badRequest(await post({ value: 7 }), 'frequency.unit');
    for (const frequency of [
      { unit: 'DAYS', value: 7 },
      { unit: 'DAYS', value: 14 },
      { unit: 'MONTHLY', value: 1 },
      { unit: 'MONTHLY', value: 31 },
    ]) {
      assert.equal((await post(frequency)).status, 201, JSON.stringify(frequency));
    }
  });

  it('P5 section names must be valid for the template; the mandatory cover is always included', async () => {
    const w = await inputWorld();
    const post = (extra: Json) =>
      w.owner.client.post('/v1/site_reports/schedules', {
        site_id: w.site.id,
        title: uniqueTitle(),
        recipients: [{ email: mailbox() }],
        ...extra,
      });
    const wrong = await post({ template_uuid: STORAGE_REPORT, sections: [{ name: 'visits' }] });
    badRequest(wrong, 'sections');
    assert.match(wrong.body.message, /"visits" not valid for template "Storage Report"/);
    badRequest(await post({ sections: [{ name: 'themes' }] }), 'sections');
    badRequest(await post({ sections: [{ name: 'storage' }, { name: 'storage' }] }), 'sections');
    badRequest(await post({ template_uuid: randomUUID() }), 'template_uuid');
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      template_uuid: STORAGE_REPORT,
      sections: [{ name: 'storage' }],
      recipients: [{ email: mailbox() }],
    });
    assert.deepEqual(s.sections, [{ name: 'cover' }, { name: 'storage' }]);
  });

  it('P2 update takes every field but site_id and answers 200 with a message', async () => {
    const w = await inputWorld();
    const other = await inputWorld();
    t.clock.set(at('2027-01-05T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: mailbox() }],
    });
    const title = uniqueTitle('Renamed');
    const res = await w.owner.client.patch(`/v1/site_reports/schedules/${s.uuid}`, {
      site_id: other.site.id,
      title,
      next_scheduled_date: '2027-02-02T09:00:00Z',
      template_uuid: STORAGE_REPORT,
      frequency: { value: 14, unit: 'DAYS' },
      recipients: [{ name: 'Bo', email: 'bo@example.test' }],
      sections: [{ name: 'environments' }],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body, { message: 'Report schedule updated' });
    const after = await scheduleOf(w.owner.client, w.site.id, title);
    assert.equal(after.uuid, s.uuid);
    assert.equal(after.site_id, w.site.id, 'site_id is not changed by an update');
    assert.equal(after.next_scheduled_date, '2027-02-02T09:00:00.000Z');
    assert.equal(after.template_uuid, STORAGE_REPORT);
    assert.deepEqual(after.frequency, { value: 14, unit: 'DAYS' });
    assert.deepEqual(after.recipients, [{ name: 'Bo', email: 'bo@example.test' }]);
    assert.deepEqual(after.sections, [{ name: 'cover' }, { name: 'environments' }]);
    // Inside frequency, value and unit are both required; the P3/P5 checks apply to updates too.
    const patch = (body: Json) => w.owner.client.patch(`/v1/site_reports/schedules/${s.uuid}`, body);
    badRequest(await patch({ frequency: { value: 7 } }), 'frequency.unit');
    badRequest(await patch({ frequency: { value: 10, unit: 'DAYS' } }), 'frequency.value');
    badRequest(await patch({ sections: [{ name: 'visits' }] }), 'sections');
    badRequest(await patch({ next_scheduled_date: '2026-01-01T00:00:00Z' }), 'next_scheduled_date');
    assert.equal((await patch({ title: 'x' })).status, 200);
    assert.equal(
      (await w.owner.client.patch(`/v1/site_reports/schedules/${randomUUID()}`, { title: 'x' })).status,
      404,
    );
  });

  it('P6 delete answers {"message": "Deleted"}; the schedule is gone and never runs', async () => {
    const w = await inputWorld();
    t.clock.set(at('2027-03-01T00:00:00Z'));
    const to = mailbox();
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: to }],
      next_scheduled_date: '2027-03-02T00:00:00Z',
    });
    const res = await w.owner.client.delete(`/v1/site_reports/schedules/${s.uuid}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { message: 'Deleted' });
    assert.deepEqual((await w.owner.client.get(`/v1/site_reports/schedules?site_id=${w.site.id}`)).body, {
      schedules: [],
    });
    assert.equal((await w.owner.client.delete(`/v1/site_reports/schedules/${s.uuid}`)).status, 404);
    await runAt('2027-03-03T00:00:00Z');
    assert.deepEqual(await reportsOf(w.owner.client, w.site.id), []);
    assert.equal(deliveredTo(to).length, 0);
  });

  it('next_scheduled_date must be in the future; at most 25 schedules per site', async () => {
    const w = await inputWorld();
    t.clock.set(at('2027-03-10T00:00:00Z'));
    const post = (extra: Json = {}) =>
      w.owner.client.post('/v1/site_reports/schedules', {
        site_id: w.site.id,
        title: uniqueTitle(),
        recipients: [{ email: mailbox() }],
        ...extra,
      });
    badRequest(await post({ next_scheduled_date: '2027-03-09T23:59:59Z' }), 'next_scheduled_date');
    badRequest(await post({ next_scheduled_date: 'tomorrow' }), 'next_scheduled_date');
    for (let i = 0; i < 25; i++) assert.equal((await post()).status, 201);
    badRequest(await post(), 'site_id');
  });
});

describe('runs on the manual clock (P3, P4)', () => {
  it('P4 MONTHLY 31 runs on 31 January, 28 February, 31 March, 30 April (2027)', async () => {
    const w = await f.world();
    t.clock.set(at('2027-01-20T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: mailbox() }],
      frequency: { unit: 'MONTHLY', value: 31 },
      next_scheduled_date: '2027-01-31T08:00:00Z',
    });
    const next = async () => (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date;
    // A minute early nothing runs.
    await runAt('2027-01-31T07:59:00Z');
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 0);
    for (const [run, following] of [
      ['2027-01-31T08:00:00Z', '2027-02-28T08:00:00.000Z'],
      ['2027-02-28T08:00:00Z', '2027-03-31T08:00:00.000Z'],
      ['2027-03-31T08:00:00Z', '2027-04-30T08:00:00.000Z'],
      ['2027-04-30T08:00:00Z', '2027-05-31T08:00:00.000Z'],
    ] as const) {
      await runAt(run);
      assert.equal(await next(), following);
    }
    const reports = await reportsOf(w.owner.client, w.site.id);
    assert.deepEqual(reports.map((r: Json) => r.date_range.end_date).reverse(), [
      '2027-01-31T08:00:00.000Z',
      '2027-02-28T08:00:00.000Z',
      '2027-03-31T08:00:00.000Z',
      '2027-04-30T08:00:00.000Z',
    ]);
    // Each period starts where the last one ended; the first one a month of the rule earlier.
    assert.equal(reports.at(-1).date_range.start_date, '2026-12-31T08:00:00.000Z');
    assert.equal(reports[0].date_range.start_date, '2027-03-31T08:00:00.000Z');
  });

  it('P4 MONTHLY 31 runs on 29 February in a leap year (2028)', async () => {
    const w = await f.world();
    t.clock.set(at('2028-01-30T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: mailbox() }],
      frequency: { unit: 'MONTHLY', value: 31 },
      next_scheduled_date: '2028-01-31T00:00:00Z',
    });
    await runAt('2028-01-31T00:00:00Z');
    assert.equal(
      (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date,
      '2028-02-29T00:00:00.000Z',
    );
    await runAt('2028-02-29T00:00:00Z');
    assert.equal(
      (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date,
      '2028-03-31T00:00:00.000Z',
    );
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 2);
  });

  it('P3 DAYS 14 keeps the weekday of next_scheduled_date, also after runs were missed', async () => {
    const w = await f.world();
    t.clock.set(at('2028-03-01T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: mailbox() }],
      frequency: { unit: 'DAYS', value: 14 },
      next_scheduled_date: '2028-03-07T10:00:00Z', // a Tuesday
    });
    const next = async () => (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date;
    await runAt('2028-03-07T10:00:00Z');
    assert.equal(await next(), '2028-03-21T10:00:00.000Z');
    await runAt('2028-03-21T10:00:30Z');
    assert.equal(await next(), '2028-04-04T10:00:00.000Z');
    // The service was down for five weeks: one report covers the gap, the next run is still a Tuesday.
    await runAt('2028-05-10T00:00:00Z');
    assert.equal(await next(), '2028-05-16T10:00:00.000Z');
    assert.equal(new Date(await next()).getUTCDay(), 2);
    const reports = await reportsOf(w.owner.client, w.site.id);
    assert.equal(reports.length, 3);
    assert.deepEqual(reports[0].date_range, {
      start_date: '2028-03-21T10:00:00.000Z',
      end_date: '2028-04-04T10:00:00.000Z',
    });
  });

  it('P2 an edit moves the next run: later, earlier, and to a new MONTHLY day', async () => {
    const w = await f.world();
    const to = mailbox();
    t.clock.set(at('2028-06-01T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: to }],
      frequency: { unit: 'MONTHLY', value: 10 },
      next_scheduled_date: '2028-06-10T06:00:00Z',
    });
    const patch = (body: Json) => w.owner.client.patch(`/v1/site_reports/schedules/${s.uuid}`, body);
    const next = async () => (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date;
    // Later: nothing runs at the old date.
    assert.equal((await patch({ next_scheduled_date: '2028-06-20T06:00:00Z' })).status, 200);
    await runAt('2028-06-10T06:00:00Z');
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 0);
    // Earlier: it runs at the new date, then on day 10 again.
    assert.equal((await patch({ next_scheduled_date: '2028-06-15T06:00:00Z' })).status, 200);
    await runAt('2028-06-15T06:00:00Z');
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 1);
    assert.equal(await next(), '2028-07-10T06:00:00.000Z');
    // A new MONTHLY day moves the next run to that day's next occurrence.
    assert.equal((await patch({ frequency: { unit: 'MONTHLY', value: 25 } })).status, 200);
    assert.equal(await next(), '2028-06-25T06:00:00.000Z');
    await runAt('2028-06-25T06:00:00Z');
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 2);
    assert.equal(deliveredTo(to).length, 2);
  });
});

describe('report generation and delivery', () => {
  it('a due report arrives by SMTP at every recipient, HTML and text, with the period’s numbers', async () => {
    const w = await f.world();
    const staging = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    await seedUsage(t, w.install.id, [
      { date: '2028-07-26', visit_count: '999999' }, // the day before the period: not counted
      {
        date: '2028-08-01',
        visit_count: '1200',
        billable_visits: '1000',
        network_total_bytes: '9007199254740993', // 2^53 + 1: exact, no float
        storage_file_bytes: '1000',
        request_origin_count: '40',
      },
      { date: '2028-08-02', visit_count: '34', storage_file_bytes: '2048' },
    ]);
    await seedUsage(t, staging.id, [
      { date: '2028-08-02', visit_count: '1000', network_total_bytes: '7', storage_file_bytes: '5' },
      { date: '2028-08-03', visit_count: '5000' }, // the run's own day: the next period's
    ]);
    t.clock.set(at('2028-07-20T00:00:00Z'));
    const recipients = [{ name: 'Ada', email: mailbox() }, { email: mailbox() }];
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      title: uniqueTitle('Weekly'),
      recipients,
      frequency: { unit: 'DAYS', value: 7 },
      next_scheduled_date: '2028-08-03T00:00:00Z',
    });
    await runAt('2028-08-03T00:00:00Z');
    for (const r of recipients) {
      const [mail, ...more] = deliveredTo(r.email);
      assert.ok(mail, `mail for ${r.email}`);
      assert.equal(more.length, 0);
      assert.match(header(mail.raw, 'Subject') ?? '', new RegExp(`^${s.title}: `));
      assert.match(header(mail.raw, 'Content-Type') ?? '', /multipart\/alternative/);
      assert.match(mail.raw, /Content-Type: text\/plain/);
      assert.match(mail.raw, /Content-Type: text\/html/);
      const body = unQuote(mail.raw);
      assert.match(body, /Period: 2028-07-27 to 2028-08-02/);
      assert.match(body, /Visits: 2,234\b/); // 1200 + 34 + 1000
      assert.match(body, /Billable visits: 1,000\b/);
      assert.match(body, /Total bandwidth: 8\.00 PiB \(9,007,199,254,741,000 bytes\)/); // 2^53 + 1 + 7
      assert.match(body, /Origin requests: 40\b/);
      assert.match(body, /File storage: 2\.00 KiB \(2,053 bytes\)/); // last day: 2048 + 5
      assert.match(body, /<svg class="chart"/);
      assert.doesNotMatch(body, /999,999|5,000\b/);
    }
    const [report, ...others] = await reportsOf(w.owner.client, w.site.id);
    assert.equal(others.length, 0);
    assert.equal(report.title, s.title);
    assert.deepEqual(report.date_range, {
      start_date: '2028-07-27T00:00:00.000Z',
      end_date: '2028-08-03T00:00:00.000Z',
    });
    assert.deepEqual(
      report.recipients,
      recipients.map((r) => ({ email: r.email })),
    );
    assert.match(
      report.download_url,
      new RegExp(`^http://localhost(:\\d+)?/v1/site_reports/${report.uuid}/download$`),
    );
    const doc = await w.owner.client.get(new URL(report.download_url).pathname);
    assert.equal(doc.status, 200);
    assert.match(String(doc.headers['content-type']), /^text\/html/);
    assert.match(String(doc.headers['content-security-policy']), /default-src 'none'/);
    assert.match(doc.body, /^<!doctype html>/);
    assert.match(doc.body, /9,007,199,254,741,000/);
    assert.doesNotMatch(doc.body, /<script|\s(?:src|href)="(?!#)|url\(/i, 'no script, no external asset');
    const outbox = (await mailOf(t)).filter((m: Json) => recipients.some((r) => r.email === m.to));
    assert.deepEqual(
      outbox.map((m: Json) => m.status),
      ['sent', 'sent'],
    );
  });

  it('a crash during generation is retried, and the report is stored and sent once', async () => {
    const w = await f.world();
    const to = mailbox();
    t.clock.set(at('2028-09-01T00:00:00Z'));
    await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: to }],
      next_scheduled_date: '2028-09-02T00:00:00Z',
    });
    // The first attempt dies inside its transaction, after the report row is written (a real
    // database error from a trigger; a sequence counts attempts outside the rolled-back work).
    const db = t.database.db;
    await db.execute(sql`create sequence if not exists report_crash_seq`);
    await db.execute(
      sql.raw(`create or replace function report_crash_once() returns trigger language plpgsql as $$
        begin
          if nextval('report_crash_seq') = 1 then raise exception 'injected crash during report generation'; end if;
          return new;
        end $$`),
    );
    await db.execute(
      sql.raw(`create trigger report_crash before insert on mail_outbox for each row
        when (new.event = 'site_report.generated') execute function report_crash_once()`),
    );
    try {
      t.clock.set(at('2028-09-02T00:00:00Z'));
      await t.runJobs(); // every queue: the failed attempt's retry included
    } finally {
      await db.execute(sql.raw('drop trigger report_crash on mail_outbox'));
    }
    const failures = t.jobLog.filter((l) => l.msg === 'job failed');
    const messages = failures.map((l) => {
      const err = (l.obj as { err?: Error & { cause?: Error } }).err;
      return `${err?.message} ${err?.cause?.message}`;
    });
    assert.ok(
      messages.some((m) => m.includes('injected crash')),
      `the first attempt failed: ${messages}`,
    );
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 1);
    assert.equal(deliveredTo(to).length, 1);
  });

  it('a generation that ran but whose job was not completed (a worker died) does not send again', async () => {
    const w = await f.world();
    const to = mailbox();
    t.clock.set(at('2028-10-01T00:00:00Z'));
    const s = await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: to }],
      next_scheduled_date: '2028-10-02T00:00:00Z',
    });
    t.clock.set(at('2028-10-02T00:00:00Z'));
    await t.app.services.due.sweep();
    // A worker takes the job, does the work and dies before marking it complete...
    const [job] = await t.queue.fetch('site-report-generate', 1);
    assert.ok(job);
    await t.app.services.jobHandlers['site-report-generate'].run(job.data as { schedule_id: string }, {
      jobId: job.id,
      attempt: 1,
      lastAttempt: false,
      signal: new AbortController().signal,
    });
    // ...so the job runs again (pg-boss retries it after its expiry; here a failed attempt).
    await t.queue.fail('site-report-generate', job.id, new Error('worker died'));
    await t.runJobs();
    assert.equal((await reportsOf(w.owner.client, w.site.id)).length, 1);
    assert.equal(deliveredTo(to).length, 1);
    assert.equal(
      (await scheduleOf(w.owner.client, w.site.id, s.title)).next_scheduled_date,
      '2028-11-01T00:00:00.000Z',
    );
  });

  it('a report is served only to callers who may read the site’s reports', async () => {
    const w = await f.world();
    t.clock.set(at('2028-11-05T00:00:00Z'));
    await createSchedule(w.owner.client, {
      site_id: w.site.id,
      recipients: [{ email: mailbox() }],
      next_scheduled_date: '2028-11-06T00:00:00Z',
    });
    await runAt('2028-11-06T00:00:00Z');
    const [report] = await reportsOf(w.owner.client, w.site.id);
    const path = new URL(report.download_url).pathname;
    const other = await f.world();
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    assert.equal((await other.owner.client.get(path)).status, 404);
    assert.equal((await partial.client.get(path)).status, 403);
    assert.equal((await t.anonymous.get(path)).status, 401);
    assert.equal((await w.owner.client.get(`/v1/site_reports/${randomUUID()}/download`)).status, 404);
  });
});
