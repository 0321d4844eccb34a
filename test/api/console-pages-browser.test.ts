// test-db: pglite (the console's subject is the browser, through the API; PGlite is what npm start serves it on: docs/decisions.md #112)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ConsoleBrowser,
  checkAccessibility,
  checkNoHorizontalOverflow,
  DESKTOP,
  keep,
  PHONE,
  signIn,
  startConsoleBrowser,
  watchApiRequests,
} from '../support/console.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, uniqueName } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';
import { b64, createPki } from '../support/pki.js';

// Issue 23, the console's site and install pages in headless Chromium (the helpers and the browser
// set-up are in test/support/console.ts): an install created from a site page and followed until it
// is active; a backup restored with a confirmation and its progress; certificates with expiry, copy
// to another environment, purge and disk usage. Every page is checked with axe-core; each test keeps
// a screenshot in test-artifacts/console/. Browser-only, so it runs once, on PGlite.
const skip = TEST_DB !== 'pglite' && 'browser test runs once, on PGlite';
const t = skip ? null : await buildTestApp();
const browser: ConsoleBrowser | null = t ? await startConsoleBrowser(t) : null;

describe('issue 23: the console site and install pages in headless Chromium', { skip }, () => {
  it('creates an install from a site page and waits until it is active (a bad name is a field error first), on a phone', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await f.world();
    const page = await browser.newPage(PHONE);
    await signIn(page, browser.base, w.owner);
    const requests = watchApiRequests(page);
    await page.getByRole('link', { name: w.account.name }).click();
    await page.getByRole('link', { name: w.site.name }).click();
    await page.getByRole('heading', { name: `Site ${w.site.name}` }).waitFor();
    await page.getByRole('heading', { name: 'Reports', exact: true }).waitFor();
    requests.reset();
    await page.reload();
    await page.getByRole('heading', { name: 'Reports', exact: true }).waitFor();
    await page.getByTestId(`install-status-${w.install.name}`).filter({ hasText: 'pending' }).waitFor();
    assert.ok(requests.depth() <= 2, `site page request waterfall ${requests.depth()} deep`);
    await checkAccessibility(page, 'the site page');
    await checkNoHorizontalOverflow(page, 'the site page on a phone');

    const name = page.getByLabel('Install name');
    await name.fill('Not A Name!');
    await page.getByLabel('Environment', { exact: true }).selectOption('staging');
    await page.getByRole('button', { name: 'Create install' }).click();
    const fieldError = page.locator('.field-error[data-field="name"]');
    await fieldError.waitFor();
    assert.equal(await name.getAttribute('aria-invalid'), 'true');
    assert.equal(
      await page.getByLabel('Environment', { exact: true }).inputValue(),
      'staging',
      'nothing chosen is lost',
    );
    await checkAccessibility(page, 'the new-install form with a field error');

    const installName = uniqueName('c');
    await name.fill(installName);
    await page.getByRole('button', { name: 'Create install' }).click();
    const status = page.getByTestId('provision-status');
    await status.filter({ hasText: 'Provisioning operation' }).waitFor();
    // The page polls the provisioning operation with back-off; the jobs run here, as a worker would.
    await t.runJobs();
    await status.filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page
      .getByTestId('new-install')
      .filter({ hasText: `${installName} is active` })
      .waitFor();
    await page.getByTestId(`install-status-${installName}`).filter({ hasText: 'active' }).waitFor();
    const installs = await w.owner.client.get(`/v1/installs?account_id=${w.account.id}`);
    const created = installs.body.results.find((i: Json) => i.name === installName);
    assert.equal(created?.status, 'active');
    assert.equal(created?.environment, 'staging');
    await checkAccessibility(page, 'the site page with the new install');
    await checkNoHorizontalOverflow(page, 'the site page with the new install on a phone');
    await keep(page, 'install-created');
  });

  it('restores a backup after a confirmation that names what is overwritten, showing its progress', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const page = await browser.newPage(DESKTOP);
    await signIn(page, browser.base, w.owner);
    await page.goto(`${browser.base}/console/#/installs/${w.install.id}`);
    await page.getByLabel('Description').fill('before the plugin update');
    await page.getByRole('button', { name: 'Take a backup' }).click();
    await page.getByTestId('operation-status').filter({ hasText: 'Backup operation' }).waitFor();
    await t.runJobs();
    await page.getByTestId('backup-status').filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });

    await page.getByRole('button', { name: 'Restore the backup before the plugin update' }).click();
    const dialog = page.getByRole('dialog', { name: 'Restore this backup?' });
    await dialog.waitFor();
    const warning = await dialog.getByTestId('restore-warning').innerText();
    assert.match(warning, new RegExp(`install ${w.install.name} \\(production\\) will be overwritten`));
    assert.match(warning, /before the plugin update/);
    await checkAccessibility(page, 'the restore confirmation');
    await keep(page, 'restore-confirmation');
    // Cancel does nothing; the second time it goes ahead.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    const before = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    assert.ok(!before.body.results.some((o: Json) => o.type === 'restore_backup'), 'cancel restores nothing');

    await page.getByRole('button', { name: 'Restore the backup before the plugin update' }).click();
    await dialog.getByRole('button', { name: `Overwrite ${w.install.name}` }).click();
    const status = page.getByTestId('restore-status');
    await status.filter({ hasText: 'Restore operation: queued' }).waitFor();
    assert.equal(await status.locator('progress').count(), 1, 'progress is shown while it runs');
    await t.runJobs();
    await status.filter({ hasText: 'Restore operation: completed' }).waitFor({ timeout: 30_000 });
    assert.equal(await status.locator('progress').count(), 0);
    const after = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const restore = after.body.results.find((o: Json) => o.type === 'restore_backup');
    assert.equal(restore?.status, 'completed');
    await checkAccessibility(page, 'the install page after a restore');
    await keep(page, 'restore');
  });

  it('shows certificates with expiry, copies to another environment after a confirmation, purges, refreshes disk usage', async () => {
    assert.ok(t && browser);
    const f = factories(t);
    const w = await readyWorld(t, f);
    const staging = await readyInstall(t, f, w, 'staging');
    const domainName = `${uniqueName('d')}.example`;
    assert.equal(
      (await w.owner.client.post(`/v1/installs/${w.install.id}/domains`, { name: domainName })).status,
      201,
    );
    const pki = createPki(t.clock.now());
    const leaf = pki.leaf({ names: [domainName] });
    const imported = await w.owner.client.post(`/v1/installs/${w.install.id}/ssl_certificates/third_party`, {
      certificate: b64(leaf.certPem + pki.intermediate.certPem + pki.root.certPem),
      private_key: b64(leaf.keyPem),
    });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));

    const page = await browser.newPage(DESKTOP);
    await signIn(page, browser.base, w.owner);
    const requests = watchApiRequests(page);
    await page.goto(`${browser.base}/console/#/installs/${w.install.id}`);
    await page.getByRole('heading', { name: 'Copy to another environment' }).waitFor();
    assert.ok(requests.depth() <= 2, `install page request waterfall ${requests.depth()} deep`);
    const certificates = page.getByTestId('certificates');
    const row = await certificates.innerText();
    assert.ok(row.includes(domainName), 'the certificate is listed');
    assert.ok(row.includes(String(imported.body.expires_time).slice(0, 10)), 'with its expiry date');
    assert.match(row, /in \d+ days/);
    await checkAccessibility(page, 'the install page with a certificate');

    // Copy: the confirmation names the destination that is overwritten.
    await page.getByLabel('Destination install').selectOption(staging.id);
    await page.getByRole('button', { name: 'Copy…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Copy this install?' });
    const warning = await dialog.getByTestId('copy-warning').innerText();
    assert.match(warning, new RegExp(`${staging.name} \\(staging\\) will be overwritten`));
    await dialog.getByRole('button', { name: `Overwrite ${staging.name}` }).click();
    await page.getByTestId('copy-status').filter({ hasText: 'Copy operation' }).waitFor();

    // Purge (object cache) and a disk usage refresh while the copy waits for its job.
    await page.getByLabel('Cache to purge').selectOption('object');
    await page.getByRole('button', { name: 'Purge' }).click();
    await page.getByTestId('purge-status').filter({ hasText: 'Purge operation' }).waitFor();
    const disk = page.getByTestId('disk-usage');
    assert.match(await disk.innerText(), /not yet/);
    await page.getByRole('button', { name: 'Refresh disk usage' }).click();
    await page.getByTestId('disk-status').filter({ hasText: 'Disk usage operation' }).waitFor();
    await t.runJobs();
    await page.getByTestId('copy-status').filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page.getByTestId('purge-status').filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page.getByTestId('disk-status').filter({ hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Refresh disk usage' }).waitFor();
    await disk.filter({ hasNotText: 'not yet' }).waitFor();
    const usage = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    const files = usage.body.metrics_rollup.storage_file_bytes.latest;
    assert.ok(files, 'the API has the measured numbers');
    assert.doesNotMatch(await disk.innerText(), /Files\s*—/, 'the numbers are shown');
    const ops = await w.owner.client.get(`/v1/installs/${w.install.id}/operations`);
    const types = new Set(ops.body.results.map((o: Json) => `${o.type}:${o.status}`));
    for (const done of ['purge_cache:completed', 'refresh_disk_usage:completed'])
      assert.ok(types.has(done), `${done} in ${[...types].join(', ')}`);
    await checkAccessibility(page, 'the install page after copy, purge and refresh');
    await keep(page, 'install-actions');
  });
});
