// test-db: pglite (the console's subject is the browser, through the API; PGlite is what npm start serves it on: docs/decisions.md #112)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  ARTIFACTS,
  type ConsoleBrowser,
  checkAccessibility,
  checkNoHorizontalOverflow,
  DESKTOP,
  firstPaint,
  type InPage,
  keep,
  PHONE,
  signIn,
  startConsoleBrowser,
  watchApiRequests,
} from '../support/console.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Client, type Json } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';
import { createSchedule, reportsOf, runReportJobs, uniqueTitle } from '../support/reports.js';
import { testSshKey } from '../support/ssh-keys.js';

// Issue 23, the console's account-level pages in headless Chromium (helpers: test/support/console.ts):
// users and invitations, SSH keys, the usage chart (uPlot, loaded on that page only) with ingested
// data, site transfers with their schedule and cancel, report schedules with their preview; every page
// on a phone (390x844) and at 200% zoom without horizontal scrolling, the first paint measured.
// axe-core on every page; screenshots in test-artifacts/console/. Browser-only: PGlite once.
const skip = TEST_DB !== 'pglite' && 'browser test runs once, on PGlite';
const t = skip ? null : await buildTestApp();
const browser: ConsoleBrowser | null = t ? await startConsoleBrowser(t) : null;
const DAY = 86_400_000;
const isoDate = (d: Date) => d.toISOString().slice(0, 10);

/** A series colour of the usage page (SERIES_COLOURS) as RGB. */
const SERIES_RGB = [
  [0x1f, 0x77, 0xb4],
  [0xd6, 0x27, 0x28],
];

/** How many pixels of the chart's canvas are drawn in each series colour. */
async function seriesPixels(page: Page): Promise<number[]> {
  return page.evaluate((colours) => {
    // biome-ignore lint/suspicious/noExplicitAny: the page's canvas
    const canvas = (globalThis as any).document.querySelector('[data-testid="usage-chart"] canvas');
    const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    return (colours as [number, number, number][]).map(([r, g, b]) => {
      let n = 0;
      for (let i = 0; i < data.length; i += 4)
        if (
          Math.abs(data[i] - r) < 8 &&
          Math.abs(data[i + 1] - g) < 8 &&
          Math.abs(data[i + 2] - b) < 8 &&
          data[i + 3] > 200
        )
          n++;
      return n;
    });
  }, SERIES_RGB);
}

/**
 * A weekly report of the site, sent: its schedule falls due tomorrow, the clock moves there and the
 * due work runs (the report and mail jobs, as a worker's would).
 */
async function sendReport(w: { owner: { client: Client }; site: { id: string } }) {
  assert.ok(t);
  const due = new Date(Date.parse(isoDate(new Date(t.clock.now().getTime() + DAY))));
  const title = uniqueTitle('Weekly for the client');
  await createSchedule(w.owner.client, {
    site_id: w.site.id,
    title,
    recipients: [{ email: 'client@example.test' }],
    frequency: { unit: 'DAYS', value: 7 },
    next_scheduled_date: due.toISOString(),
  });
  t.clock.set(due);
  await runReportJobs(t);
  const reports = await reportsOf(w.owner.client, w.site.id);
  assert.ok(
    reports.some((r) => r.title === title),
    'the API lists the sent report',
  );
  return { title, due };
}

describe('issue 23: the console account pages in headless Chromium', { skip }, () => {
  it('invites a user and sees the invitation listed (a bad email is a field error beside Email first)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const page = await browser.newPage(PHONE);
    await signIn(page, browser.base, w.owner);
    await page.getByRole('link', { name: w.account.name }).click();
    await page.getByRole('link', { name: 'Users and invitations' }).click();
    await page.getByRole('heading', { name: `Users of ${w.account.name}` }).waitFor();
    await page.getByTestId('members').filter({ hasText: w.owner.email }).waitFor();
    await checkAccessibility(page, 'the users page');

    await page.getByLabel('First name').fill('Grace');
    await page.getByLabel('Last name').fill('Hopper');
    await page.getByLabel('Email').fill('not-an-address');
    await page.getByLabel('Role', { exact: true }).selectOption('partial');
    await page.getByRole('button', { name: 'Send the invitation' }).click();
    const fieldError = page.locator('.field-error[data-field="email"]');
    await fieldError.waitFor();
    assert.equal(await page.getByLabel('Email').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.getByLabel('First name').inputValue(), 'Grace', 'nothing typed is lost');
    await checkAccessibility(page, 'the invite form with a field error');

    await page.getByLabel('Role', { exact: true }).selectOption('full');
    await page.getByLabel('Email').fill('grace@example.test');
    await page.getByRole('button', { name: 'Send the invitation' }).click();
    const invitations = page.getByTestId('invitations');
    await invitations.filter({ hasText: 'grace@example.test' }).waitFor();
    assert.match(await invitations.innerText(), /Grace Hopper\s+grace@example.test\s+Full/);
    const users = await w.owner.client.get(`/v1/accounts/${w.account.id}/account_users`);
    const grace = users.body.results.find((u: Json) => u.email === 'grace@example.test');
    assert.equal(grace?.invite_accepted, false);
    assert.equal(grace?.roles, 'full');
    await checkAccessibility(page, 'the users page with an invitation');
    await checkNoHorizontalOverflow(page, 'the users page on a phone');
    await keep(page, 'invitation');
  });

  it("changes a member's role with the keyboard and it persists after a reload; demoting the last owner is the API's error beside the field", async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const grace = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const page = await browser.newPage(PHONE);
    await signIn(page, browser.base, w.owner);
    await page.goto(`${browser.base}/console/#/accounts/${w.account.id}/users`);
    await page.getByTestId('members').filter({ hasText: grace.email }).waitFor();
    const graceRole = page.getByLabel(`Role of ${grace.email}`, { exact: true });
    assert.equal(await graceRole.inputValue(), 'full');
    await checkAccessibility(page, 'the users page with a role select per member');

    // Keyboard only: the select, then Tab to its Save button, then Enter.
    await graceRole.focus();
    await graceRole.selectOption('partial,billing');
    await page.keyboard.press('Tab');
    const save = page.getByRole('button', { name: `Save the role of ${grace.email}` });
    assert.equal(
      await save.evaluate((b) => b === (globalThis as unknown as InPage).document.activeElement),
      true,
    );
    await page.keyboard.press('Enter');
    await page
      .getByRole('form', { name: `Change the role of ${grace.email}` })
      .getByRole('status')
      .filter({ hasText: 'Saved.' })
      .waitFor();
    const changed = await w.owner.client.get(`/v1/accounts/${w.account.id}/account_users/${grace.userId}`);
    assert.equal(changed.body.roles, 'partial,billing', 'the API has it');
    await page.reload();
    await page.getByTestId('members').filter({ hasText: grace.email }).waitFor();
    assert.equal(
      await page.getByLabel(`Role of ${grace.email}`, { exact: true }).inputValue(),
      'partial,billing',
      'after a reload',
    );

    // The only owner cannot lose the role: the API's field error beside that member's select.
    const ownerRole = page.getByLabel(`Role of ${w.owner.email}`, { exact: true });
    await ownerRole.selectOption('full');
    await page.getByRole('button', { name: `Save the role of ${w.owner.email}` }).click();
    const fieldError = page
      .getByRole('form', { name: `Change the role of ${w.owner.email}` })
      .locator('.field-error[data-field="roles"]');
    await fieldError.waitFor();
    assert.match(await fieldError.innerText(), /at least one owner/);
    assert.equal(await ownerRole.getAttribute('aria-invalid'), 'true');
    assert.ok(
      (await ownerRole.getAttribute('aria-describedby'))?.includes(
        String(await fieldError.getAttribute('id')),
      ),
      'the error describes the select',
    );
    const owner = await w.owner.client.get(`/v1/accounts/${w.account.id}/account_users/${w.owner.userId}`);
    assert.equal(owner.body.roles, 'owner', 'still the owner');
    await checkAccessibility(page, 'the users page with a role error');
    await checkNoHorizontalOverflow(page, 'the users page with a role error on a phone');
    await keep(page, 'member-role');
  });

  it('lists, adds and deletes SSH keys (a bad key is a field error)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const page = await browser.newPage(DESKTOP);
    await signIn(page, browser.base, w.owner);
    await page.getByRole('link', { name: 'SSH keys' }).click();
    // An empty table keeps its column headers and says so in a cell of its own (DataTable).
    const table = page.getByRole('table', { name: 'Your SSH keys' });
    await table.getByRole('cell', { name: 'No SSH key yet.' }).waitFor();
    const headers = table.getByRole('columnheader');
    assert.deepEqual(
      await headers.evaluateAll((ths) => ths.map((th) => `${th.textContent} ${th.getAttribute('scope')}`)),
      ['Comment col', 'Fingerprint col', 'Added col', 'Actions col'],
    );
    await page.getByLabel('Public key').fill('ssh-ed25519 not-base64!');
    await page.getByRole('button', { name: 'Add the key' }).click();
    await page.locator('.field-error[data-field="public_key"]').waitFor();
    await checkAccessibility(page, 'the SSH key form with a field error');

    const key = testSshKey('ed25519', 'ada@laptop');
    await page.getByLabel('Public key').fill(key.line);
    await page.getByRole('button', { name: 'Add the key' }).click();
    await table.filter({ hasText: 'ada@laptop' }).waitFor();
    const listed = await w.owner.client.get('/v1/ssh_keys');
    assert.equal(listed.body.count, 1);
    assert.ok((await table.innerText()).includes(listed.body.results[0].fingerprint), 'its fingerprint');
    await checkAccessibility(page, 'the SSH keys page with a key');
    await keep(page, 'ssh-keys');

    await page.getByRole('button', { name: 'Delete the key ada@laptop' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this SSH key?' });
    await dialog.getByRole('button', { name: 'Delete the key' }).click();
    await table.getByRole('cell', { name: 'No SSH key yet.' }).waitFor();
    assert.equal((await w.owner.client.get('/v1/ssh_keys')).body.count, 0);
  });

  it('draws the usage chart with ingested data, one line per environment (uPlot loaded on this page only)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const staging = await readyInstall(t, f, w, 'staging');
    const today = new Date(t.clock.now().getTime());
    const days = [3, 2, 1].map((n) => isoDate(new Date(today.getTime() - n * DAY)));
    const rows = days.flatMap((date, i) => [
      { install_id: w.install.id, date, visit_count: 1000 + 500 * i, network_total_bytes: 2 ** 30 * (i + 1) },
      { install_id: staging.id, date, visit_count: 10 + i, network_total_bytes: 2 ** 20 },
    ]);
    const ingested = await t.admin.post('/admin/v1/usage', { rows });
    assert.equal(ingested.status, 200, JSON.stringify(ingested.body));

    const page = await browser.newPage(DESKTOP);
    const scripts: string[] = [];
    page.on('request', (r) => {
      if (r.resourceType() === 'script') scripts.push(new URL(r.url()).pathname);
    });
    await signIn(page, browser.base, w.owner);
    await page.getByRole('link', { name: w.account.name }).click();
    await page.getByRole('link', { name: 'Usage' }).waitFor();
    assert.equal(scripts.length, 1, `one script before the usage page: ${scripts.join(', ')}`);
    await page.getByRole('link', { name: 'Usage' }).click();
    const table = page.getByTestId('usage-table');
    await table.waitFor();
    assert.equal(scripts.length, 2, 'the chart library is loaded with the usage page');

    const text = await table.innerText();
    assert.ok(text.includes(w.install.name) && text.includes(staging.name), 'one column per environment');
    for (const [i, date] of days.entries()) {
      assert.match(text, new RegExp(`${date}\\s+${(1000 + 500 * i).toLocaleString('en-US')}\\s+${10 + i}`));
    }
    const [production, stagingPixels] = await seriesPixels(page);
    assert.ok((production ?? 0) > 20, `the production line is drawn (${production} pixels)`);
    assert.ok((stagingPixels ?? 0) > 20, `the staging line is drawn (${stagingPixels} pixels)`);
    await checkAccessibility(page, 'the usage page');
    await keep(page, 'usage');

    // Another metric over the same window: bytes, formatted.
    await page.getByLabel('Metric').selectOption('network_total_bytes');
    await page.getByTestId('usage-table').filter({ hasText: '3.0 GiB' }).waitFor();
    assert.match(await page.getByTestId('usage-table').innerText(), /1\.0 MiB/);

    // A window longer than the API allows: its error beside the field it names.
    await page.getByLabel('From').fill(isoDate(new Date(today.getTime() - 60 * DAY)));
    await page.getByRole('button', { name: 'Show' }).click();
    await page.locator('.field-error[data-field="last_date"]').waitFor();
    await checkAccessibility(page, 'the usage page with a field error');
  });

  it('schedules a site transfer, shows its schedule and cancels it (too soon is a field error first)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const destination = await f.account();
    const member = await t.admin.put(`/admin/v1/users/${w.owner.userId}/memberships/${destination.id}`, {
      roles: 'owner',
    });
    assert.ok(member.status < 300, JSON.stringify(member.body));
    const page = await browser.newPage(PHONE);
    await signIn(page, browser.base, w.owner);
    await page.goto(`${browser.base}/console/#/sites/${w.site.id}`);
    await page.getByRole('heading', { name: 'Transfers' }).waitFor();
    await page.getByLabel('Destination account').selectOption(destination.id);
    // datetime-local is local time: the browser and this process share the machine's zone.
    const local = (ms: number) => {
      const d = new Date(t.clock.now().getTime() + ms);
      return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    };
    const when = page.getByLabel('When (optional, local time)');
    await when.fill(local(10 * 60_000));
    await page.getByRole('button', { name: 'Schedule the transfer' }).click();
    await page.locator('.field-error[data-field="scheduled_time"]').waitFor();
    assert.equal(await when.getAttribute('aria-invalid'), 'true');
    await checkAccessibility(page, 'the transfer form with a field error');

    await when.fill(local(2 * DAY));
    await page.getByRole('button', { name: 'Schedule the transfer' }).click();
    const transfers = page.getByTestId('transfers');
    // The status cell: the table (and its "Scheduled for" header) is there before the transfer is.
    const status = page.getByTestId('transfer-status');
    await status.filter({ hasText: /^scheduled$/ }).waitFor();
    const listed = await w.owner.client.get(`/v1/sites/${w.site.id}/site_transfers`);
    const transfer = listed.body.results[0];
    assert.equal(transfer?.status, 'scheduled');
    assert.equal(transfer?.destination_account, destination.name);
    assert.ok((await transfers.innerText()).includes(destination.name));
    await checkAccessibility(page, 'the site page with a scheduled transfer');
    await checkNoHorizontalOverflow(page, 'the site page with a transfer on a phone');
    await keep(page, 'transfer');

    await page.getByRole('button', { name: `Cancel the transfer to ${destination.name}` }).click();
    await page
      .getByRole('dialog', { name: 'Cancel this transfer?' })
      .getByRole('button', { name: 'Cancel the transfer' })
      .click();
    await status.filter({ hasText: /^cancelled$/ }).waitFor();
    const after = await w.owner.client.get(`/v1/sites/${w.site.id}/site_transfers`);
    assert.equal(after.body.results[0]?.status, 'cancelled');
  });

  it('creates a report schedule with a preview of the report (a bad recipient is a field error first)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const page = await browser.newPage(DESKTOP);
    await signIn(page, browser.base, w.owner);
    await page.goto(`${browser.base}/console/#/sites/${w.site.id}`);
    await page.getByRole('heading', { name: 'New report schedule' }).waitFor();
    await page.getByLabel('Report title').fill('Monthly for the client');
    await page.getByLabel('Recipients (email addresses)').fill('client@example.test, nope');
    const preview = page.getByTestId('report-preview');
    assert.match(await preview.innerText(), /Monthly for the client/);
    const images = await preview.locator('img').count();
    assert.ok(images > 0, 'the preview shows the sections');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.locator('.field-error[data-field="recipients"]').waitFor();
    await checkAccessibility(page, 'the report schedule form with a field error');

    await page.getByLabel('Recipients (email addresses)').fill('client@example.test');
    await page.getByLabel('Frequency').selectOption('DAYS:7');
    assert.match(await preview.innerText(), /covering the last 7 days/);
    await page.getByRole('button', { name: 'Create schedule' }).click();
    const schedules = page.getByTestId('schedules');
    await schedules.filter({ hasText: 'Monthly for the client' }).waitFor();
    assert.match(await schedules.innerText(), /Every 7 day\(s\).*client@example.test/s);
    const stored = await w.owner.client.get(`/v1/site_reports/schedules?site_id=${w.site.id}`);
    assert.equal(stored.body.schedules[0]?.title, 'Monthly for the client');
    assert.deepEqual(stored.body.schedules[0]?.frequency, { value: 7, unit: 'DAYS' });
    assert.equal(stored.body.schedules[0]?.sections.length, images, 'every previewed section is scheduled');
    await checkAccessibility(page, 'the site page with a report schedule');
    await keep(page, 'report-schedule');
  });

  it('lists the reports a schedule sent and shows one as it was sent (API download in a sandboxed frame)', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const { title, due } = await sendReport(w);
    const period = `${isoDate(new Date(due.getTime() - 7 * DAY))} to ${isoDate(new Date(due.getTime() - DAY))}`;

    const page = await browser.newPage(PHONE);
    await signIn(page, browser.base, w.owner);
    await page.goto(`${browser.base}/console/#/sites/${w.site.id}`);
    const sent = page.getByTestId('sent-reports');
    await sent.filter({ hasText: title }).waitFor();
    const row = await sent.innerText();
    assert.ok(row.includes(period), `the period ${period} in ${row}`);
    assert.ok(row.includes('client@example.test'), 'its recipients');
    await checkAccessibility(page, 'the site page with a sent report');
    await checkNoHorizontalOverflow(page, 'the site page with a sent report on a phone');

    await page.getByRole('button', { name: `View the report ${title} of ${period}` }).click();
    const frame = page.frameLocator(`iframe[title="The report ${title} as sent"]`);
    const body = frame.locator('body');
    await body.filter({ hasText: w.site.name }).waitFor();
    const text = await body.innerText();
    assert.ok(text.includes(title), 'the document is the sent one');
    assert.ok(text.includes(period), 'with its period');
    // Styled as mailed (its <style> applied through the CSSOM, the console's CSP unchanged).
    assert.match(
      await body.evaluate((b) => (globalThis as unknown as InPage).getComputedStyle(b).fontFamily),
      /system-ui/,
    );
    const heading = page.getByRole('heading', { name: `${title}, ${period}` });
    assert.equal(
      await heading.evaluate((h) => h === (globalThis as unknown as InPage).document.activeElement),
      true,
      'focus moves to the report',
    );
    await checkAccessibility(page, 'the site page showing a sent report');
    await checkNoHorizontalOverflow(page, 'a sent report on a phone');
    await keep(page, 'sent-report');
    await page.getByRole('button', { name: 'Close the report' }).click();
    assert.equal(await page.getByTestId('sent-report').count(), 0, 'closed');
  });

  it('every page is readable on a phone and at 200% zoom (no horizontal scrolling), dark theme; first paint measured', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await readyWorld(t, f);
    await sendReport(w); // the site page with its sent reports' table
    const page = await browser.newPage(PHONE);
    await page.emulateMedia({ colorScheme: 'dark' });
    const fresh = await browser.context.newPage();
    await fresh.goto(`${browser.base}/console/`);
    const paint = await firstPaint(fresh);
    await fresh.close();
    console.log(`console first contentful paint: ${paint.toFixed(0)} ms`);
    fs.writeFileSync(
      path.join(ARTIFACTS, 'first-paint.json'),
      `${JSON.stringify({ first_contentful_paint_ms: paint })}\n`,
    );

    await signIn(page, browser.base, w.owner);
    const requests = watchApiRequests(page);
    // Each page with what shows once all its data is in (then its requests are all counted).
    const pages: [string, string, (p: Page) => Promise<void>][] = [
      ['accounts', '#/accounts', (p) => p.getByRole('link', { name: w.account.name }).waitFor()],
      ['sites', `#/accounts/${w.account.id}`, (p) => p.getByRole('link', { name: w.install.name }).waitFor()],
      ['site', `#/sites/${w.site.id}`, (p) => p.getByTestId('sent-reports').waitFor()],
      [
        'install',
        `#/installs/${w.install.id}`,
        (p) => p.getByRole('heading', { name: 'Copy to another environment' }).waitFor(),
      ],
      ['users', `#/accounts/${w.account.id}/users`, (p) => p.getByTestId('members').waitFor()],
      ['ssh-keys', '#/ssh-keys', (p) => p.getByText('No SSH key yet.').waitFor()],
      ['usage', `#/accounts/${w.account.id}/usage`, (p) => p.getByTestId('usage-chart').waitFor()],
    ];
    const session = await browser.context.newCDPSession(page);
    for (const [zoom, metrics] of [
      ['phone', { width: PHONE.width, height: PHONE.height, deviceScaleFactor: 3, mobile: true }],
      // 200% zoom of a 1280x900 window: half as many CSS pixels, each two device pixels.
      ['200%', { width: 640, height: 450, deviceScaleFactor: 2, mobile: false }],
    ] as const) {
      await session.send('Emulation.setDeviceMetricsOverride', metrics);
      for (const [name, hash, ready] of pages) {
        // A fresh load of each page (about:blank in between), so only its own requests are counted.
        await page.goto('about:blank');
        requests.reset();
        await page.goto(`${browser.base}/console/${hash}`);
        await ready(page);
        await checkNoHorizontalOverflow(page, `${name} (${zoom})`);
        assert.ok(requests.depth() <= 2, `${name}: request waterfall ${requests.depth()} deep`);
        if (zoom === 'phone') await checkAccessibility(page, `${name} (dark, phone)`);
        await keep(page, `${zoom === 'phone' ? 'phone' : 'zoom200'}-${name}`);
      }
    }
    await session.send('Emulation.clearDeviceMetricsOverride');
  });
});
