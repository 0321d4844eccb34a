import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { simulatedInstalls } from '../../src/db/schema.js';
import { JOBS } from '../../src/jobs/catalog.js';
import { expectFieldError } from '../support/assertions.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { mailOf, operationOf, readyInstall, readyWorld } from '../support/jobs.js';

const t = await buildTestApp();
const f = factories(t);

/** What the simulated platform holds for an install (files, tables). */
async function platform(installId: string) {
  const [row] = await t.database.db
    .select()
    .from(simulatedInstalls)
    .where(eq(simulatedInstalls.install_id, installId));
  assert.ok(row, `no simulated state for ${installId}`);
  return row;
}

/** A world with a production and a staging install, both active and different. */
async function twoInstalls() {
  const w = await readyWorld(t, f);
  const staging = await readyInstall(t, f, w, 'staging');
  await t.admin.patch(`/admin/v1/installs/${staging.id}`, { wp_version: '6.8.1' });
  return { w, source: staging, destination: w.install };
}

const copy = (w: Json, body: Json) => w.owner.client.post('/v1/install_copy', body);

describe('copyInstall', () => {
  it('C2 C5 C6 copies files and database over the destination (202 with the operation, Location) and notifies every address', async () => {
    const { w, source, destination } = await twoInstalls();
    const res = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      notification_emails: ['dev@example.test', 'lead@example.test'],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const queued = await operationOf(w.owner.client, res);
    assert.deepEqual(res.body, queued);
    assert.equal(queued.type, 'copy_install');
    assert.deepEqual(queued.resource, { type: 'install', id: destination.id });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed');
    const after = await w.owner.client.get(`/v1/installs/${destination.id}`);
    assert.equal(after.body.wp_version, '6.8.1');
    const [from, to] = [await platform(source.id), await platform(destination.id)];
    assert.equal(to.file_bytes, from.file_bytes);
    assert.deepEqual(to.db_tables, from.db_tables);
    const mail = await mailOf(t, op.id);
    assert.deepEqual(mail.map((m) => m.to).sort(), ['dev@example.test', 'lead@example.test']);
    for (const m of mail) {
      assert.equal(m.event, 'copy_install.completed');
      assert.match(m.subject, new RegExp(`Copy of install ${destination.name} completed`));
      assert.ok(m.text.includes(source.name) && m.html.includes(source.name));
    }
  });

  it('C3 with db_tables only those tables are copied; the files stay when include_files is false', async () => {
    const { w, source, destination } = await twoInstalls();
    const [from, before] = [await platform(source.id), await platform(destination.id)];
    const res = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      custom_options: { include_files: false, db_tables: ['wp_options', 'wp_posts'] },
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const to = await platform(destination.id);
    assert.equal(to.file_bytes, before.file_bytes);
    assert.deepEqual(to.db_tables, {
      ...before.db_tables,
      wp_options: from.db_tables.wp_options,
      wp_posts: from.db_tables.wp_posts,
    });
    assert.equal((await w.owner.client.get(`/v1/installs/${destination.id}`)).body.wp_version, '6.7.1');
  });

  it('C4 db_tables with include_db false is a 400 on custom_options.db_tables', async () => {
    const { w, source, destination } = await twoInstalls();
    const res = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      custom_options: { include_db: false, db_tables: ['wp_options'] },
    });
    expectFieldError(res, 'custom_options.db_tables', 'invalid_value');
    const nothing = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      custom_options: { include_db: false, include_files: false },
    });
    assert.equal(nothing.status, 400);
  });

  it('C1 source and destination must be on one account (400), and must differ (400)', async () => {
    const a = await readyWorld(t, f);
    const b = await readyWorld(t, f);
    const both = await f.user([
      { account_id: a.account.id, roles: 'owner' },
      { account_id: b.account.id, roles: 'owner' },
    ]);
    const res = await both.client.post('/v1/install_copy', {
      source_environment_id: a.install.id,
      destination_environment_id: b.install.id,
    });
    expectFieldError(res, 'destination_environment_id');
    assert.match(res.body.message, /both must be on one account/);
    const same = await copy(a, {
      source_environment_id: a.install.id,
      destination_environment_id: a.install.id,
    });
    expectFieldError(same, 'destination_environment_id');
  });

  it('G7 a missing or malformed id is a 400 naming the field', async () => {
    const { w, destination } = await twoInstalls();
    const missing = await copy(w, { destination_environment_id: destination.id });
    expectFieldError(missing, 'source_environment_id');
    const malformed = await copy(w, {
      source_environment_id: 'x',
      destination_environment_id: destination.id,
    });
    expectFieldError(malformed, 'source_environment_id');
    const unknown = await copy(w, {
      source_environment_id: '00000000-0000-4000-8000-000000000000',
      destination_environment_id: destination.id,
    });
    assert.equal(unknown.status, 404);
  });

  it('G12 a busy destination is a 400 that says what it is busy with (no 409: the spec lists no Conflict)', async () => {
    const { w, source, destination } = await twoInstalls();
    const first = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
    });
    assert.equal(first.status, 202);
    const again = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
    });
    expectFieldError(again, 'destination_environment_id', 'value_unavailable', 'install_busy');
    assert.equal(
      again.body.message,
      `Install ${destination.name} is busy: a copy from install ${source.name} is being written to it (operation ${first.body.id})`,
    );
    // The source of a running copy cannot be overwritten either.
    const reverse = await copy(w, {
      source_environment_id: destination.id,
      destination_environment_id: source.id,
    });
    assert.equal(reverse.status, 400);
    assert.match(reverse.body.message, /busy: /);
    // Backing up the source while it is read is fine.
    const backup = await w.owner.client.post(`/v1/installs/${source.id}/backups`, {
      description: 'while copying',
      notification_emails: [],
    });
    assert.equal(backup.status, 202);
    await t.runJobs();
    assert.equal(
      (await copy(w, { source_environment_id: source.id, destination_environment_id: destination.id }))
        .status,
      202,
    );
    await t.runJobs();
  });

  it('C6 fault injection: a copy whose every attempt fails ends failed with a clear error and a failure mail', async () => {
    const { w, source, destination } = await twoInstalls();
    const before = await platform(destination.id);
    await t.admin.post('/admin/v1/faults', {
      operation: 'copy',
      count: JOBS.copy_install.retryLimit + 1,
      mode: 'fail',
    });
    const res = await copy(w, {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      notification_emails: ['dev@example.test'],
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed');
    assert.equal(op.error, 'The copy failed: simulated copy failure (injected fault)');
    assert.deepEqual(await platform(destination.id), before);
    const [mail] = await mailOf(t, op.id);
    assert.equal(mail.event, 'copy_install.failed');
    assert.match(mail.subject, /Copy of install .+ failed/);
    assert.ok(mail.text.includes(op.error) && mail.html.includes(op.error));
  });
});
