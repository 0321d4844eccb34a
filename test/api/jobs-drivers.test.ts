import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, type TestApp } from '../support/harness.js';
import { mailOf, operationOf, readyInstall, readyWorld } from '../support/jobs.js';

// Issue 16: the job engine's happy paths (backup, restore with checkpoint, copy, disk refresh) on
// both drivers: what the API and the operations show must not depend on which driver does the work.
// Driver-specific effects (files, rows, sizes) are proved in local-driver.test.ts and the tests of
// each module; here only the engine's contract is asserted.
const apps = {
  simulated: await buildTestApp(),
  local: await buildTestApp({ driver: 'local' }),
};
const EMAILS = ['ops@example.test'];

function scenarios(t: TestApp, driver: keyof typeof apps) {
  const f = factories(t);

  async function backupOf(w: Json) {
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'engine',
      notification_emails: EMAILS,
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    const shown = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${res.body.id}`);
    assert.equal(shown.body.status, 'completed');
    assert.ok(shown.body.complete_time);
    const mail = await mailOf(t, op.id);
    assert.deepEqual(
      mail.map((m) => [m.to, m.event]),
      [['ops@example.test', 'create_backup.completed']],
    );
    return res.body;
  }

  it('B2 B3 a backup completes, its record and operation say so, and the address is mailed', async () => {
    await backupOf(await readyWorld(t, f));
  });

  it('R1 R2 R3 a restore takes a completed checkpoint first, then completes and mails', async () => {
    const w = await readyWorld(t, f);
    const backup = await backupOf(w);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: EMAILS,
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/backups`);
    assert.equal(list.body.count, 2);
    assert.ok(list.body.results.every((b: Json) => b.status === 'completed'));
    const mail = await mailOf(t, op.id);
    assert.ok(mail.length === 1 && mail[0].event === 'restore_backup.completed');
  });

  it('C2 C6 a copy completes and mails', async () => {
    const w = await readyWorld(t, f);
    const destination = await readyInstall(t, f, w, 'staging');
    const res = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: w.install.id,
      destination_environment_id: destination.id,
      notification_emails: EMAILS,
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    const mail = await mailOf(t, op.id);
    assert.ok(mail.length === 1 && mail[0].event === 'copy_install.completed');
  });

  it('M7 M9 a disk refresh records both byte counts and clears the expected time', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    assert.equal(res.status, 200);
    await t.runJobs();
    const usage = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.equal(usage.body.storage_refresh_expected_time, null);
    assert.ok(usage.body.storage_update_time);
    assert.ok(Number(usage.body.metrics[0].storage_file_bytes) > 0);
    assert.ok(Number(usage.body.metrics[0].storage_database_bytes) >= 0);
  });

  it('issue 20: a stored task result of the wrong shape is refused with an error naming its kind, never answered', async () => {
    const w = await readyWorld(t, f);
    const call = { key: randomUUID(), signal: new AbortController().signal };
    const install = { id: w.install.id, name: w.install.name, wp_version: null };
    const first = await t.app.services.driver.measureDisk(call, install);
    assert.equal(first.done, true);
    // The finished task's record is damaged (a hand edit, a bad migration, another version's shape):
    // asking again with the same key must not hand it on as a disk usage.
    const table = driver === 'local' ? 'local_tasks' : 'simulated_tasks';
    const damaged = await queryRows<{ key: string }>(
      t.database.db,
      sql`update ${sql.identifier(table)} set result = ${JSON.stringify({ file_bytes: 'lots', database_bytes: 0 })}::jsonb
          where key = ${`measure_disk:${call.key}`} returning key`,
    );
    assert.equal(damaged.length, 1);
    await assert.rejects(t.app.services.driver.measureDisk(call, install), (err: Error) => {
      assert.equal(err.name, 'DriverError');
      assert.match(err.message, new RegExp(`${driver} task measure_disk:${call.key}`));
      assert.match(err.message, /not a measure_disk result/);
      assert.match(err.message, /file_bytes/);
      return true;
    });
  });
}

for (const [driver, t] of Object.entries(apps) as [keyof typeof apps, TestApp][]) {
  describe(`job engine on the ${driver} driver (issue 16)`, () => scenarios(t, driver));
}
