import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JOBS } from '../../src/jobs/catalog.js';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { mailOf, operationOf, operationPath, readyInstall, readyWorld } from '../support/jobs.js';

// Attempts expire after 1 s, so a hung driver call (fault mode "hang") costs a second, not minutes.
const t = await buildTestApp({ env: { JOB_EXPIRE_SECONDS: '1' } });
const f = factories(t);
const EMAILS = ['ops@example.test', 'owner@example.test'];
const ATTEMPTS = JOBS.create_backup.retryLimit + 1;

async function fault(operation: string, count: number, mode: 'fail' | 'hang' = 'fail') {
  const res = await t.admin.post('/admin/v1/faults', { operation, count, mode });
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

async function completedBackup(w: Json, description = 'nightly') {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description,
    notification_emails: EMAILS,
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await t.runJobs();
  return res.body;
}

const setWpVersion = (installId: string, wp_version: string) =>
  t.admin.patch(`/admin/v1/installs/${installId}`, { wp_version });

describe('createBackup', () => {
  it('B1 description and notification_emails are required (400 with a field error each, G7)', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {});
    assert.equal(res.status, 400);
    const fields = res.body.errors.map((e: Json) => e.field).sort();
    assert.deepEqual(fields, ['description', 'notification_emails']);
    for (const e of res.body.errors) {
      assert.deepEqual(Object.keys(e).sort(), ['code', 'field', 'message', 'resource', 'type']);
      assert.equal(e.resource, 'backup');
      assert.equal(e.type, 'invalid_value');
    }
    const badEmail = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'x',
      notification_emails: ['not-an-address'],
    });
    expectFieldError(badEmail, 'notification_emails[0]');
  });

  it('B2 answers 202 with the Backup record (complete_time null, wordpress_version recorded) and the operation in Location', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'before the theme change',
      notification_emails: EMAILS,
    });
    assert.equal(res.status, 202);
    assert.deepEqual(Object.keys(res.body).sort(), [
      'complete_time',
      'create_time',
      'description',
      'id',
      'status',
      'wordpress_version',
    ]);
    assert.equal(res.body.status, 'requested');
    assert.equal(res.body.complete_time, null);
    assert.equal(res.body.description, 'before the theme change');
    assert.equal(res.body.wordpress_version, '6.7.1');
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.type, 'create_backup');
    assert.equal(op.status, 'queued');
    assert.deepEqual(op.resource, { type: 'backup', id: res.body.id });
    assert.match(String(res.headers.location), /^http:\/\/localhost(:80)?\/v1\/operations\//);
  });

  it('B2 a backup completes through its job: completed, complete_time set, the version it holds recorded', async () => {
    const w = await readyWorld(t, f);
    await setWpVersion(w.install.id, '6.5.2');
    const created = await completedBackup(w);
    const shown = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${created.id}`);
    assert.equal(shown.status, 200);
    assert.equal(shown.body.status, 'completed');
    assert.ok(shown.body.complete_time);
    assert.equal(shown.body.wordpress_version, '6.5.2');
    const listed = await w.owner.client.get(`/v1/installs/${w.install.id}/backups`);
    assert.equal(listed.body.count, 1);
    assert.deepEqual(listed.body.results[0], shown.body);
  });

  it('B3 every address in notification_emails gets one mail (text and HTML) naming install, operation, outcome and times', async () => {
    const w = await readyWorld(t, f);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'weekly',
      notification_emails: [...EMAILS, EMAILS[0]],
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    const mail = await mailOf(t, op.id);
    assert.deepEqual(mail.map((m) => m.to).sort(), [...EMAILS].sort());
    for (const m of mail) {
      assert.equal(m.status, 'kept'); // no SMTP_URL: kept and listed
      assert.equal(m.event, 'create_backup.completed');
      assert.match(m.subject, new RegExp(`Backup of install ${w.install.name} completed`));
      for (const body of [m.text, m.html]) {
        assert.ok(body.includes(w.install.name));
        assert.ok(body.includes(op.id));
        assert.ok(body.includes(op.created_at));
        assert.ok(body.includes(op.completed_at));
        assert.ok(body.includes('weekly'));
        assert.match(body, /completed/);
      }
      assert.match(m.html, /^<!doctype html>/);
    }
    // Running the jobs again sends nothing more.
    await t.runJobs();
    assert.equal((await mailOf(t, op.id)).length, 2);
  });

  it('G5 G6 listBackups pages newest first', async () => {
    const w = await readyWorld(t, f);
    for (const description of ['one', 'two', 'three']) {
      t.clock.advance(1000);
      await completedBackup(w, description);
    }
    const page = await w.owner.client.get(`/v1/installs/${w.install.id}/backups?limit=2`);
    assert.equal(page.body.count, 3);
    assert.deepEqual(
      page.body.results.map((b: Json) => b.description),
      ['three', 'two'],
    );
    assert.ok(page.body.next);
  });

  it('G4 a backup of another install is 404 on show and restore', async () => {
    const w = await readyWorld(t, f);
    const other = await readyInstall(t, f, w, 'staging');
    const backup = await completedBackup(w);
    const shown = await w.owner.client.get(`/v1/installs/${other.id}/backups/${backup.id}`);
    assert.equal(shown.status, 404);
    const restore = await w.owner.client.post(`/v1/installs/${other.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(restore.status, 404);
  });

  it('G12 a backup of an install still being provisioned is a 400 that says so', async () => {
    const w = await f.world();
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'too early',
      notification_emails: [],
    });
    expectFieldError(res, 'install_id', 'value_unavailable');
    assert.match(res.body.message, /busy: it is still being provisioned/);
  });

  it('B2 fault injection: a backup whose every attempt fails ends aborted, complete_time null, with a failure mail', async () => {
    const w = await readyWorld(t, f);
    await fault('backup', ATTEMPTS);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'doomed',
      notification_emails: EMAILS,
    });
    await t.runJobs();
    const shown = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${res.body.id}`);
    assert.equal(shown.body.status, 'aborted');
    assert.equal(shown.body.complete_time, null);
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.match(op.error, /^The backup failed: simulated backup failure \(injected fault\)/);
    const mail = await mailOf(t, op.id);
    assert.equal(mail.length, 2);
    for (const m of mail) {
      assert.equal(m.event, 'create_backup.failed');
      assert.match(m.subject, /failed$/);
      assert.ok(m.text.includes(op.error));
    }
  });

  it('B2 a fault fewer than the attempts is retried away: the backup completes', async () => {
    const w = await readyWorld(t, f);
    await fault('backup', ATTEMPTS - 1);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'flaky',
      notification_emails: [],
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
  });

  it('G10 a hung driver call is aborted at the job expiry and retried', async () => {
    const w = await readyWorld(t, f);
    await fault('backup', 1, 'hang');
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'hangs once',
      notification_emails: [],
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    assert.ok(t.jobLog.some((l) => /expiry/.test(String((l.obj as { err?: Error }).err?.message))));
  });
});

describe('restoreBackup', () => {
  it('R1 notification_emails is required (400, G7)', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {});
    expectFieldError(res, 'notification_emails');
  });

  it('R1 R2 by default a checkpoint backup completes first, then the backup’s WordPress version is restored', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w, 'known good');
    await setWpVersion(w.install.id, '6.8.0');
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: EMAILS,
    });
    assert.equal(res.status, 202);
    const queued = await operationOf(w.owner.client, res);
    assert.deepEqual(res.body, queued);
    assert.equal(queued.type, 'restore_backup');
    assert.deepEqual(queued.resource, { type: 'backup', id: backup.id });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed');
    const install = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(install.body.wp_version, '6.7.1');
    const backups = await w.owner.client.get(`/v1/installs/${w.install.id}/backups`);
    const checkpoint = backups.body.results.find((b: Json) => b.id !== backup.id);
    assert.equal(checkpoint.status, 'completed');
    assert.equal(checkpoint.wordpress_version, '6.8.0'); // the state before the restore
    assert.match(checkpoint.description, /Checkpoint before restoring backup/);
    assert.ok(checkpoint.complete_time <= op.completed_at);
    // R3
    const mail = await mailOf(t, op.id);
    assert.deepEqual(mail.map((m) => m.to).sort(), [...EMAILS].sort());
    assert.ok(mail.every((m) => m.event === 'restore_backup.completed' && m.text.includes(checkpoint.id)));
  });

  it('R2 create_checkpoint false restores without a checkpoint', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}/backups`)).body.count, 1);
  });

  it('R1 restore_database false brings back the files but keeps the database', async () => {
    const w = await readyWorld(t, f);
    const source = await readyInstall(t, f, w, 'staging');
    const dbBytes = async () => {
      await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
      await t.runJobs();
      const usage = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
      // Most recent day first (getInstallUsageMetrics).
      return usage.body.metrics[0].storage_database_bytes;
    };
    const backup = await completedBackup(w);
    const original = await dbBytes();
    const copy = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: source.id,
      destination_environment_id: w.install.id,
      custom_options: { include_files: false },
    });
    assert.equal(copy.status, 202);
    await t.runJobs();
    const copied = await dbBytes();
    assert.notEqual(copied, original);
    const filesOnly = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      restore_database: false,
      create_checkpoint: false,
    });
    assert.equal(filesOnly.status, 202);
    await t.runJobs();
    assert.equal(await dbBytes(), copied);
    const everything = await w.owner.client.post(
      `/v1/installs/${w.install.id}/backups/${backup.id}/restore`,
      {
        notification_emails: [],
        create_checkpoint: false,
      },
    );
    assert.equal(everything.status, 202);
    await t.runJobs();
    assert.equal(await dbBytes(), original);
  });

  it('G12 one restore at a time per install: a second is a 400 naming the restore in progress', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    const url = `/v1/installs/${w.install.id}/backups/${backup.id}/restore`;
    const first = await w.owner.client.post(url, { notification_emails: [] });
    assert.equal(first.status, 202);
    const second = await w.owner.client.post(url, { notification_emails: [] });
    expectFieldError(second, 'install_id', 'value_unavailable');
    assert.match(
      second.body.message,
      new RegExp(`busy: a restore is in progress \\(operation ${first.body.id}\\)`),
    );
    // A backup cannot start while the install is being restored either.
    const backupNow = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'during restore',
      notification_emails: [],
    });
    assert.equal(backupNow.status, 400);
    assert.match(backupNow.body.message, /a restore is in progress/);
    await t.runJobs();
    assert.equal((await w.owner.client.post(url, { notification_emails: [] })).status, 202);
  });

  it('G12 one restore at a time holds under concurrent requests', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    const url = `/v1/installs/${w.install.id}/backups/${backup.id}/restore`;
    const results = await Promise.all(
      Array.from({ length: 5 }, () => w.owner.client.post(url, { notification_emails: [] })),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [202, 400, 400, 400, 400]);
  });

  it('G12 restoring during a backup is a 400 naming the backup; a backup that is not completed cannot be restored', async () => {
    const w = await readyWorld(t, f);
    const done = await completedBackup(w);
    const running = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
      description: 'in flight',
      notification_emails: [],
    });
    const restore = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${done.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(restore.status, 400);
    assert.match(restore.body.message, /busy: a backup is in progress \(operation .+\)/);
    const notDone = await w.owner.client.post(
      `/v1/installs/${w.install.id}/backups/${running.body.id}/restore`,
      {
        notification_emails: [],
      },
    );
    assert.equal(notDone.status, 400);
    assert.match(notDone.body.message, /is requested; only a completed backup can be restored/);
    await t.runJobs();
  });

  it('R2 R3 fault injection: a failed restore keeps its checkpoint, leaves the install as it was, and mails the failure', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    await setWpVersion(w.install.id, '6.8.0');
    await fault('restore', ATTEMPTS);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: EMAILS,
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.match(op.error, /^The restore failed: simulated restore failure/);
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.wp_version, '6.8.0');
    const backups = (await w.owner.client.get(`/v1/installs/${w.install.id}/backups`)).body.results;
    const checkpoint = backups.find((b: Json) => b.id !== backup.id);
    assert.equal(checkpoint.status, 'completed');
    const mail = await mailOf(t, op.id);
    assert.equal(mail.length, 2);
    assert.ok(
      mail.every((m) => m.event === 'restore_backup.failed' && m.text.includes(`${checkpoint.id} (kept)`)),
    );
  });

  it('R2 fault injection: a failed checkpoint aborts the restore before anything is restored', async () => {
    const w = await readyWorld(t, f);
    const backup = await completedBackup(w);
    await setWpVersion(w.install.id, '6.8.0');
    await fault('backup', ATTEMPTS);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: EMAILS,
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.match(op.error, /^The checkpoint backup failed, so nothing was restored/);
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.wp_version, '6.8.0');
    const checkpoint = (await w.owner.client.get(`/v1/installs/${w.install.id}/backups`)).body.results.find(
      (b: Json) => b.id !== backup.id,
    );
    assert.equal(checkpoint.status, 'aborted');
    const mail = await mailOf(t, op.id);
    assert.ok(mail.length === 2 && mail.every((m) => m.event === 'restore_backup.failed'));
    assert.ok(operationPath(res));
  });
});
