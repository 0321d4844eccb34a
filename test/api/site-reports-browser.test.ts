// test-db: pglite (a browser test, run once: docs/decisions.md #112)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';
import { createSchedule, reportsOf, runReportJobs, seedUsage } from '../support/reports.js';

// A generated report rendered by a real browser: Debian's chromium driven by playwright-core
// (scripts/test.sh installs chromium when it is missing). Screenshots and a PDF print are kept
// under .tmp/artifacts/. The page is browser-only, so one database is enough: it runs on PGlite.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.resolve('.tmp/artifacts');
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Two weeks of believable usage for one install, from `first` on. */
function usageDays(first: string, days: number) {
  return Array.from({ length: days }, (_, i) => {
    const date = new Date(Date.parse(first) + i * 86_400_000).toISOString().slice(0, 10);
    const visits = 800 + ((i * 137) % 500);
    return {
      date,
      visit_count: String(visits),
      billable_visits: String(Math.floor(visits * 0.9)),
      network_origin_bytes: String(visits * 350_000),
      network_cdn_bytes: String(visits * 1_200_000),
      network_total_bytes: String(visits * 1_550_000),
      storage_file_bytes: String(2_000_000_000 + i * 15_000_000),
      storage_database_bytes: String(300_000_000 + i * 2_000_000),
      request_origin_count: String(visits * 12),
    };
  });
}

describe('a generated report in headless Chromium', {
  skip: TEST_DB !== 'pglite' && 'browser test runs once, on PGlite',
}, () => {
  it('renders with every chart visible, loads nothing from outside, and prints', async () => {
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/test.sh installs Debian's chromium`);
    const t = await buildTestApp();
    const f = factories(t);
    const w = await f.world();
    await seedUsage(t, w.install.id, usageDays('2029-01-01', 14));
    t.clock.set(new Date('2029-01-10T00:00:00Z'));
    await createSchedule(w.owner.client, {
      site_id: w.site.id,
      title: 'Fortnightly site report',
      recipients: [{ name: 'Ada', email: 'ada@example.test' }],
      frequency: { unit: 'DAYS', value: 14 },
      next_scheduled_date: '2029-01-15T00:00:00Z',
    });
    t.clock.set(new Date('2029-01-15T00:00:00Z'));
    await runReportJobs(t);
    const [report] = await reportsOf(w.owner.client, w.site.id);
    assert.ok(report, 'a report was generated');

    // The browser fetches the document the way a client would: download_url with Basic auth.
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const url = `http://127.0.0.1:${port}${new URL(report.download_url).pathname}`;
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-chromium-'));
    after(() => fs.rmSync(profile, { recursive: true, force: true }));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      extraHTTPHeaders: { authorization: w.owner.authorization },
      viewport: { width: 900, height: 1200 },
    });
    try {
      const page = await browser.newPage();
      const outside: string[] = [];
      await page.route('**/*', (route) => {
        if (route.request().url() === url) return route.continue();
        outside.push(route.request().url());
        return route.abort();
      });
      const response = await page.goto(url, { waitUntil: 'load' });
      assert.equal(response?.status(), 200);
      assert.match(await page.title(), /^Fortnightly site report: /);

      const charts = page.locator('svg.chart');
      assert.equal(await charts.count(), 4, 'visits, bandwidth, requests and storage');
      const checkCharts = async () => {
        for (let i = 0; i < 4; i++) {
          const chart = charts.nth(i);
          assert.ok(await chart.isVisible(), `chart ${i} is visible`);
          const box = await chart.boundingBox();
          assert.ok(box && box.width > 100 && box.height > 50, `chart ${i} box ${JSON.stringify(box)}`);
          const bars = chart.locator('rect.bar');
          assert.ok((await bars.count()) >= 14, `chart ${i} has a bar per day`);
          const tallest = await bars.evaluateAll((els) =>
            Math.max(
              ...els.map(
                (e) =>
                  (e as unknown as { getBoundingClientRect(): { height: number } }).getBoundingClientRect()
                    .height,
              ),
            ),
          );
          assert.ok(tallest > 10, `chart ${i}: bars have height (${tallest})`);
        }
      };
      await checkCharts();
      const text = await page.locator('main').innerText();
      const visits = usageDays('2029-01-01', 14).reduce((a, d) => a + Number(d.visit_count), 0);
      assert.ok(text.includes(visits.toLocaleString('en-US')), `the total of visits ${visits} is shown`);

      fs.mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: path.join(ARTIFACTS, 'site-report.png'), fullPage: true });
      // Readable when printed: the print stylesheet keeps every chart, and Chromium prints a PDF.
      await page.emulateMedia({ media: 'print' });
      await checkCharts();
      await page.screenshot({ path: path.join(ARTIFACTS, 'site-report-print.png'), fullPage: true });
      const pdf = await page.pdf({ path: path.join(ARTIFACTS, 'site-report.pdf'), format: 'A4' });
      assert.ok(pdf.length > 10_000, `a PDF of ${pdf.length} bytes`);
      assert.deepEqual(outside, [], 'the report loads nothing but itself');
      const png = fs.statSync(path.join(ARTIFACTS, 'site-report.png'));
      assert.ok(png.size > 20_000, 'the screenshot holds a rendered page');
    } finally {
      await browser.close();
    }
  });
});
