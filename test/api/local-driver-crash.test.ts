// test-db: postgres (several processes on one database: PGlite is one process's; docs/decisions.md #112)
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { and, eq } from 'drizzle-orm';
import { backups, operations } from '../../src/db/schema.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { checksums, type LocalDriverProbe, localHosting, writeSite } from '../support/local-hosting.js';
import { type Running, runCli } from '../support/process.js';

/** Polls `check` every 100 ms until it answers truthy (the work runs in other processes). */
async function until(what: string, check: () => Promise<unknown>, ms = 120_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Issue 16, G10: `hostplane worker` processes on PostgreSQL with the local driver, one of them
// SIGKILLed half-way through a real backup, restore and copy (an injected hang holds each call after
// its staging, before anything is swapped). PGlite allows one process, so this runs on PostgreSQL.
// (It once timed out because the copy read from the install being backed up, and work on one install
// is serial in a worker: the copy waited behind the hung backup and never reached its own half-way
// point. The copy reads from another install.)
if (TEST_DB === 'postgres') {
  describe('local driver: a worker killed in the middle of a backup, a restore and a copy (G10, issue 16)', async () => {
    const host = await localHosting();
    const jobEnv = {
      // Long enough that a hang held half-way outlasts the slowest of the three reaching it on a
      // loaded machine; the killed worker's jobs come back through its lease (2 s), not the expiry.
      JOB_EXPIRE_SECONDS: '180',
      JOB_MAINTENANCE_SECONDS: '1',
      JOB_RETRY_DELAY_SECONDS: '0',
      JOB_POLL_INTERVAL_MS: '200',
      JOB_SWEEP_INTERVAL_MS: '200',
      JOB_DRAIN_SECONDS: '1',
      JOB_HEARTBEAT_SECONDS: '1',
      JOB_LEASE_SECONDS: '2',
    };
    const t = await buildTestApp({ env: { ...jobEnv, ...host.env } });
    const f = factories(t);
    const db = t.database.db;
    const driver = t.app.services.driver as unknown as LocalDriverProbe;
    const workerEnv = {
      ...jobEnv,
      ...host.env,
      DATABASE_URL: t.databaseUrl ?? '',
      DATA_DIR: path.join(host.root, 'worker-data'),
      HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
      HOSTPLANE_SECRET_KEY: SECRET_KEY,
      HOSTPLANE_FAULTS: 'on',
      // All three operations hang at once in one worker: each needs its own heavy-operation slot.
      LOCAL_MAX_HEAVY_OPERATIONS: '3',
    };
    const running: Running[] = [];
    after(async () => {
      for (const run of running)
        if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    });
    const startWorker = async () => {
      const run = runCli(['worker'], workerEnv);
      running.push(run);
      await run.waitFor(/Hostplane worker is running \d+ job queues on PostgreSQL/);
      return run;
    };
    const opStatus = async (id: string) =>
      (await db.select({ s: operations.status }).from(operations).where(eq(operations.id, id)))[0]?.s;
    const seed = async (installId: string, title: string) => {
      const conn = await host.asInstall(driver, installId);
      await conn.query('CREATE TABLE wp_posts (id INT PRIMARY KEY, title VARCHAR(200))');
      await conn.query('INSERT INTO wp_posts VALUES (1, ?), (2, ?)', [title, `${title} too`]);
      await conn.end();
    };
    const state = async (installId: string) => ({
      files: await checksums(host.paths(installId).public),
      posts: await host.rows(installId, 'wp_posts'),
    });

    it('G10 each operation completes exactly once after a new worker retries it; until then the installs are as they were', async () => {
      const w = await f.world();
      const b = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
      const c = await f.install(w.owner.client, w.account.id, w.site.id, 'development');
      // The copy's source is not the install being backed up: work on one install is serial in a
      // worker, so a copy from it would wait behind the hung backup.
      const other = await f.site(w.owner.client, w.account.id);
      const d = await f.install(w.owner.client, w.account.id, other.id, 'production');
      let worker = await startWorker();
      for (const id of [w.install.id, b.id, c.id, d.id]) {
        await until(
          'provisioning',
          async () => (await w.owner.client.get(`/v1/installs/${id}`)).body.status === 'active',
        );
      }
      const a = w.install;
      await writeSite(host.paths(a.id).public, '6.8.2', 'source');
      await writeSite(host.paths(b.id).public, '6.7.1', 'restore point');
      await writeSite(host.paths(c.id).public, '6.6.0', 'destination');
      await writeSite(host.paths(d.id).public, '6.8.2', 'copy source');
      await seed(d.id, 'd');
      await seed(a.id, 'a');
      await seed(b.id, 'b');
      await seed(c.id, 'c');
      const base = await w.owner.client.post(`/v1/installs/${b.id}/backups`, {
        description: 'restore point',
        notification_emails: [],
      });
      await until('the restore point', async () => {
        const shown = await w.owner.client.get(`/v1/installs/${b.id}/backups/${base.body.id}`);
        return shown.body.status === 'completed';
      });
      const restorePoint = await state(b.id);
      // B changes after its backup; the restore must bring the backup back.
      await writeSite(host.paths(b.id).public, '6.9.0', 'changed');
      const conn = await host.asInstall(driver, b.id);
      await conn.query("UPDATE wp_posts SET title = 'edited'");
      await conn.end();
      const before = {
        a: await state(a.id),
        b: await state(b.id),
        c: await state(c.id),
        d: await state(d.id),
      };

      for (const operation of ['backup', 'restore', 'copy'])
        await t.admin.post('/admin/v1/faults', { operation, count: 1, mode: 'hang' });
      const backup = await w.owner.client.post(`/v1/installs/${a.id}/backups`, {
        description: 'mid-crash',
        notification_emails: [],
      });
      const copy = await w.owner.client.post('/v1/install_copy', {
        source_environment_id: d.id,
        destination_environment_id: c.id,
      });
      const restore = await w.owner.client.post(`/v1/installs/${b.id}/backups/${base.body.id}/restore`, {
        notification_emails: [],
        create_checkpoint: false,
      });
      assert.deepEqual([backup.status, copy.status, restore.status], [202, 202, 202]);
      const ids = {
        backup: new URL(String(backup.headers.location)).pathname.split('/').pop() ?? '',
        copy: copy.body.id as string,
        restore: restore.body.id as string,
      };
      // Each call took its hang half-way: staging written, nothing swapped.
      let seen = '';
      await until('all three to hang half-way', async () => {
        const states = await Promise.all(Object.values(ids).map(opStatus));
        const faults = (await t.admin.get('/admin/v1/faults')).body.faults;
        seen = JSON.stringify({ states, faults });
        return states.every((s) => s === 'in_progress') && faults.length === 0;
      }).catch((err) => {
        throw new Error(`${err.message}: ${seen}\n${worker.output().slice(-3000)}`);
      });
      assert.ok((await fs.readdir(host.paths(a.id).backups)).some((n) => n.startsWith('.tmp-')));
      assert.equal((await fs.readdir(path.join(host.root, 'staging'))).length, 2);
      worker.child.kill('SIGKILL');
      assert.equal(await worker.exited, 'SIGKILL');
      // Intact: every install exactly as before the three operations.
      assert.deepEqual(
        { a: await state(a.id), b: await state(b.id), c: await state(c.id), d: await state(d.id) },
        before,
      );

      worker = await startWorker();
      await until('all three to complete', async () =>
        (await Promise.all(Object.values(ids).map(opStatus))).every((s) => s === 'completed'),
      );
      assert.deepEqual(await state(b.id), restorePoint);
      assert.deepEqual(await state(c.id), before.d);
      assert.deepEqual(await state(a.id), before.a);
      assert.equal(await driver.countCompleted(b.id, 'restore'), 1);
      assert.equal(await driver.countCompleted(c.id, 'copy'), 1);
      assert.equal(await driver.countCompleted(a.id, 'backup'), 1);
      const made = await db
        .select({ status: backups.status })
        .from(backups)
        .where(and(eq(backups.install_id, a.id)));
      assert.deepEqual(made, [{ status: 'completed' }]);
      // What the killed attempts left was cleaned by the retries.
      const left = await fs.readdir(host.paths(a.id).backups);
      assert.equal(left.length, 1);
      assert.ok(!left.some((n) => n.startsWith('.tmp-')));
      assert.deepEqual(await fs.readdir(path.join(host.root, 'staging')), []);
      const shown: Json = await w.owner.client.get(`/v1/installs/${c.id}`);
      assert.equal(shown.body.wp_version, '6.8.2');
      worker.child.kill('SIGTERM');
      await worker.exited;
    });
  });
}
