import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Client, Json, TestApp } from './harness.js';

/**
 * What a worker does when a report falls due, without draining every queue of the app: the
 * sweeper moves due rows into the queue, then the report and mail jobs run (the same runner as
 * `runJobs`; retry back-off skipped). `runJobs` stays the tool of the tests of retries.
 */
export async function runReportJobs(t: TestApp): Promise<number> {
  let ran = 0;
  for (let round = 0; round < 20; round++) {
    const swept = await t.app.services.due.sweep();
    let now = 0;
    for (const name of ['site-report-generate', 'mail-deliver']) {
      for (;;) {
        const [job] = await t.queue.fetch(name, 1, { ignoreStartAfter: true });
        if (!job) break;
        await t.runner.runJob(name, job);
        now++;
      }
    }
    ran += now;
    if (swept === 0 && now === 0) return ran;
  }
  throw new Error('runReportJobs: work kept coming');
}

export const uniqueTitle = (prefix = 'Report') => `${prefix} ${randomBytes(4).toString('hex')}`;

/** Creates a schedule (P1 answers only a message) and finds it in the site's listing (P6). */
export async function createSchedule(client: Client, body: Record<string, unknown>): Promise<Json> {
  const title = (body.title as string | undefined) ?? uniqueTitle();
  const res = await client.post('/v1/site_reports/schedules', { ...body, title });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.deepEqual(Object.keys(res.body), ['message']);
  const schedule = await scheduleOf(client, body.site_id as string, title);
  assert.ok(schedule, 'the new schedule is listed');
  return schedule;
}

/** The schedule of `siteId` with `title`, as GET /v1/site_reports/schedules lists it. */
export async function scheduleOf(client: Client, siteId: string, title: string): Promise<Json> {
  const list = await client.get(`/v1/site_reports/schedules?site_id=${siteId}`);
  assert.equal(list.status, 200, JSON.stringify(list.body));
  return list.body.schedules.find((s: Json) => s.title === title);
}

/**
 * Deletes every schedule of `siteId` (P6 delete). A file's schedules all stay due on its one manual
 * clock: tests that only check input leave none behind, so each later clock move runs no report of
 * theirs (each would be generated and mailed again at every move).
 */
export async function deleteSchedules(client: Client, siteId: string): Promise<void> {
  const list = await client.get(`/v1/site_reports/schedules?site_id=${siteId}`);
  assert.equal(list.status, 200, JSON.stringify(list.body));
  for (const s of list.body.schedules as Json[]) {
    const res = await client.delete(`/v1/site_reports/schedules/${s.uuid}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
}

export async function reportsOf(client: Client, siteId: string): Promise<Json[]> {
  const res = await client.get(`/v1/site_reports?site_id=${siteId}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.reports;
}

export type UsageRow = { date: string } & Partial<
  Record<
    | 'visit_count'
    | 'billable_visits'
    | 'network_origin_bytes'
    | 'network_cdn_bytes'
    | 'network_total_bytes'
    | 'storage_file_bytes'
    | 'storage_database_bytes'
    | 'request_origin_count',
    string
  >
>;

/**
 * Daily usage rows straight into install_usage_daily (the table reports read; ingestion is the
 * usage module's). Values are decimal strings, cast in SQL so figures above 2^53 stay exact.
 */
export async function seedUsage(t: TestApp, installId: string, rows: UsageRow[]) {
  const v = (x: string | undefined) => (x === undefined ? sql`null` : sql`${x}::bigint`);
  for (const r of rows) {
    await t.database.db.execute(
      sql`insert into install_usage_daily (install_id, date, visit_count, billable_visits, network_origin_bytes,
            network_cdn_bytes, network_total_bytes, storage_file_bytes, storage_database_bytes, request_origin_count)
          values (${installId}, ${r.date}::date, ${v(r.visit_count)}, ${v(r.billable_visits)}, ${v(r.network_origin_bytes)},
            ${v(r.network_cdn_bytes)}, ${v(r.network_total_bytes)}, ${v(r.storage_file_bytes)},
            ${v(r.storage_database_bytes)}, ${v(r.request_origin_count)})`,
    );
  }
}
