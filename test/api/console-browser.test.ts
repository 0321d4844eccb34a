// test-db: pglite (the console's subject is the browser, through the API; PGlite is what npm start serves it on: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import zlib from 'node:zlib';
import {
  type ConsoleBrowser,
  checkAccessibility,
  type InPage,
  keep,
  PHONE,
  signIn,
  startConsoleBrowser,
} from '../support/console.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';

// Issue 23: the web console (packages/console, served at /console) driven in Debian's chromium by
// playwright-core, against a real server on a loopback port (the helpers and the browser set-up are
// in test/support/console.ts). Each test keeps a screenshot of its last page in
// test-artifacts/console/, and every page it visits is checked with axe-core (no serious or critical
// violation). The console is browser-only, so one database is enough: it runs on PGlite.
const skip = TEST_DB !== 'pglite' && 'browser test runs once, on PGlite';
const t = skip ? null : await buildTestApp();
const browser: ConsoleBrowser | null = t ? await startConsoleBrowser(t) : null;
const base = browser?.base ?? '';
const newPage = (viewport?: { width: number; height: number }) => {
  assert.ok(browser);
  return browser.newPage(viewport);
};

describe('issue 23: the web console in headless Chromium', { skip }, () => {
  it('signs in with an API credential kept in sessionStorage only, lists the accounts, first page JS under 150 KB gzipped', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await f.world();
    const page = await newPage();
    // A wrong password is refused on the sign-in page itself.
    await page.goto(`${base}/console/`);
    await page.getByLabel('Username').fill(w.owner.username);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not accepted' }).waitFor();

    await signIn(page, base, w.owner);
    await page.getByRole('link', { name: w.account.name }).waitFor();
    assert.ok(!page.url().includes(w.owner.password), 'the password is in no URL');
    const stored = await page.evaluate(() => {
      const g = globalThis as unknown as InPage;
      return {
        session: JSON.stringify(g.sessionStorage),
        local: g.localStorage.length,
        cookie: g.document.cookie,
      };
    });
    assert.ok(stored.session.includes(w.owner.username), 'the credential is in sessionStorage');
    assert.equal(stored.local, 0, 'nothing in localStorage');
    assert.equal(stored.cookie, '', 'no cookie');
    await checkAccessibility(page, 'the accounts page');

    // The budget: every script the first page loads, gzipped.
    const html = await (await fetch(`${base}/console/`)).text();
    const scripts = [...html.matchAll(/<script[^>]+src="([^"]+)"/g)].map((m) => m[1] as string);
    assert.ok(scripts.length > 0);
    let gzipped = 0;
    for (const src of scripts) {
      const body = Buffer.from(await (await fetch(new URL(src, base))).arrayBuffer());
      gzipped += zlib.gzipSync(body).length;
    }
    console.log(`console first page JS: ${gzipped} bytes gzipped in ${scripts.length} script(s)`);
    assert.ok(gzipped < 150 * 1024, `${gzipped} bytes gzipped`);
    await keep(page, 'accounts');
  });

  it('creates a site, showing the API field error beside the name field for a blank name', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await f.world();
    const page = await newPage(PHONE);
    await signIn(page, base, w.owner);
    await page.getByRole('link', { name: w.account.name }).click();
    await page.getByRole('heading', { name: `Sites of ${w.account.name}` }).waitFor();
    await page.getByRole('link', { name: w.install.name }).waitFor();
    await checkAccessibility(page, 'the sites page');
    await page.getByRole('link', { name: 'New site' }).click();

    const name = page.getByLabel('Name', { exact: true });
    await name.fill('   ');
    await page.getByLabel('Group (optional)').fill('Agency clients');
    await page.getByRole('button', { name: 'Create site' }).click();
    const fieldError = page.locator('.field-error[data-field="name"]');
    await fieldError.waitFor();
    assert.match(await fieldError.innerText(), /\S/, 'the API message is shown');
    assert.equal(await name.getAttribute('aria-invalid'), 'true');
    const describedBy = await name.getAttribute('aria-describedby');
    assert.ok(
      describedBy?.includes(await fieldError.getAttribute('id').then(String)),
      'the error describes the field',
    );
    assert.equal(
      await page.getByLabel('Group (optional)').inputValue(),
      'Agency clients',
      'nothing typed is lost',
    );
    await checkAccessibility(page, 'the new-site form with a field error');

    await name.fill('Shop of Ada');
    await name.press('Enter');
    await page.getByRole('heading', { name: 'Shop of Ada' }).waitFor();
    const sites = await w.owner.client.get(`/v1/sites?account_id=${w.account.id}`);
    assert.ok(
      sites.body.results.some((s: { name: string }) => s.name === 'Shop of Ada'),
      'the API has it',
    );
    await checkAccessibility(page, 'the sites page with the new site');
    await keep(page, 'create-site');
  });

  it('adds a domain to an install and shows the verification record to copy', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const page = await newPage(PHONE);
    await signIn(page, base, w.owner);
    await page.goto(`${base}/console/#/installs/${w.install.id}`);
    await page.getByRole('heading', { name: `Install ${w.install.name}` }).waitFor();
    await checkAccessibility(page, 'the install page');

    await page.getByLabel('Domain name').fill('www.ada-shop.example');
    await page.getByRole('button', { name: 'Add domain' }).click();
    const record = page.getByTestId('verification-record');
    await record.waitFor();
    const domains = await w.owner.client.get(`/v1/installs/${w.install.id}/domains`);
    const domain = domains.body.results.find((d: { name: string }) => d.name === 'www.ada-shop.example');
    assert.ok(domain?.txt_verification_value, 'the API made a verification record');
    const text = await record.innerText();
    assert.ok(text.includes(domain.txt_verification_key), 'the record name is shown');
    assert.ok(text.includes(domain.txt_verification_value), 'the record value is shown');
    await checkAccessibility(page, 'the install page with a domain');
    await keep(page, 'domain');
  });

  it('takes a backup and follows its operation until it is completed (dark theme)', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const page = await newPage(PHONE);
    await page.emulateMedia({ colorScheme: 'dark' });
    await signIn(page, base, w.owner);
    await page.goto(`${base}/console/#/installs/${w.install.id}`);
    await page.getByRole('heading', { name: 'Backups' }).waitFor();
    await page.getByLabel('Description').fill('before the theme change');
    await page.getByLabel('Notify (email addresses)').fill('ops@example.test');
    await page.getByRole('button', { name: 'Take a backup' }).click();
    const status = page.getByTestId('operation-status');
    await status.filter({ hasText: 'Backup operation' }).waitFor();
    // The page polls the operation with back-off; the jobs run here, as a worker would.
    await t.runJobs();
    await status.filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page.getByTestId('backup-status').filter({ hasText: 'completed' }).waitFor();
    const backups = await w.owner.client.get(`/v1/installs/${w.install.id}/backups`);
    assert.equal(backups.body.results[0]?.status, 'completed');
    await checkAccessibility(page, 'the install page after a backup (dark)');
    await keep(page, 'backup');
  });

  it('a 401 takes the person back to sign-in', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await f.world();
    const page = await newPage();
    await signIn(page, base, w.owner);
    // The credential goes bad while the tab is open (a wrong password in its session storage).
    await page.evaluate((username) => {
      (globalThis as unknown as InPage).sessionStorage.setItem(
        'hostplane.credential',
        JSON.stringify({ username, password: 'revoked' }),
      );
    }, w.owner.username);
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Sign in again' }).waitFor();
    assert.equal(
      await page.evaluate(() => (globalThis as unknown as InPage).sessionStorage.length),
      0,
      'the refused credential is forgotten',
    );
    await checkAccessibility(page, 'sign-in after a 401');
    await keep(page, 'after-401');
  });

  it('a 503 shows a retry banner, keeps what was typed, and the retry goes through', async () => {
    assert.ok(t);
    const f = factories(t);
    const w = await f.world();
    const page = await newPage();
    await signIn(page, base, w.owner);
    await page.goto(`${base}/console/#/accounts/${w.account.id}/new-site`);
    // The server is unavailable for the first POST /v1/sites (as behind a proxy that answers 503).
    let refused = 0;
    await page.route(`${base}/v1/sites`, (route) => {
      if (route.request().method() === 'POST' && refused === 0) {
        refused++;
        return route.fulfill({
          status: 503,
          headers: { 'content-type': 'application/json', 'retry-after': '1' },
          body: JSON.stringify({ message: 'Service unavailable' }),
        });
      }
      return route.continue();
    });
    await page.getByLabel('Name', { exact: true }).fill('Retried site');
    await page.getByLabel('Tags (optional)').fill('blue, green');
    await page.getByRole('button', { name: 'Create site' }).click();
    const banner = page.locator('.banner');
    await banner.waitFor();
    assert.match(await banner.innerText(), /not answering/);
    assert.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Retried site');
    assert.equal(await page.getByLabel('Tags (optional)').inputValue(), 'blue, green');
    await checkAccessibility(page, 'the new-site form with the retry banner');
    await keep(page, 'retry-banner');
    await banner.getByRole('button', { name: 'Retry' }).click();
    await page.getByRole('heading', { name: 'Retried site' }).waitFor();
    assert.equal(refused, 1);
    assert.equal(await banner.count(), 0, 'the banner is gone');
    await keep(page, 'after-retry');
  });
});
