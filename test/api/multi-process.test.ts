import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import {
  appliedCalls,
  cluster,
  type HttpCall,
  httpClient,
  operationIdOf,
  operationStatus,
  stop,
  until,
} from '../support/cluster.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, uniqueName } from '../support/harness.js';
import type { Running } from '../support/process.js';

/**
 * Issue 15 (G10): two `hostplane api` and two `hostplane worker` processes on one PostgreSQL
 * database. A scenario alternates between the two APIs; the workers share the jobs. Everything
 * completes, and exactly once (one record, one driver call, one operation each).
 */
if (TEST_DB !== 'postgres') {
  describe('several processes on one database (issue 15)', { skip: 'PostgreSQL only' }, () => {
    it('G10 2 api + 2 worker processes run a scenario through both APIs, each step once');
  });
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-multi-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const t = await buildTestApp();
  const f = factories(t);
  const db = t.database.db;
  const procs = cluster({
    databaseUrl: t.databaseUrl ?? '',
    tmp,
    env: {
      HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
      SIMULATED_DURATIONS: 'provision=1,backup=1,copy=1,restore=1,move_site=1,measure_disk=0,purge_cache=0',
    },
  });

  describe('several processes on one database (issue 15)', () => {
    it('G10 B1 R1 C1 T9 2 api + 2 worker processes: create, back up, restore, copy, transfer and list through both APIs alternately; everything completes exactly once', {
      timeout: 300_000,
    }, async (ctx) => {
      const running: Running[] = [];
      try {
        const [a1, a2, w1, w2] = await Promise.all([
          procs.api(),
          procs.api(),
          procs.worker(),
          procs.worker(),
        ]);
        running.push(a1.run, a2.run, w1, w2);
        const w = await f.world();
        const dest = await f.account();
        await f.site((await f.user([{ account_id: dest.id, roles: 'owner' }])).client, dest.id);
        await t.admin.put(`/admin/v1/users/${w.owner.userId}/memberships/${dest.id}`, { roles: 'owner' });
        const apis: HttpCall[] = [a1.origin, a2.origin].map((o) => httpClient(o, w.owner.authorization));
        let turn = 0;
        /** The next API process, in turn. */
        const next = () => apis[turn++ % apis.length] as HttpCall;
        const done = (op: string) =>
          until(
            `operation ${op} to complete`,
            async () => (await operationStatus(db, op)) === 'completed',
            120_000,
          );
        const before = await appliedCalls(db);

        // Create (API 1) two installs on the world's site.
        const names = [uniqueName('mp'), uniqueName('mp')];
        const created = [];
        for (const [i, environment] of (['staging', 'development'] as const).entries()) {
          const res = await next()('POST', '/v1/installs', {
            name: names[i],
            account_id: w.account.id,
            site_id: w.site.id,
            environment,
          });
          assert.equal(res.status, 201, JSON.stringify(res.body));
          created.push(res.body.id as string);
        }
        const [staging, dev] = created as [string, string];
        for (const id of [w.install.id, staging, dev]) {
          await until(
            'provisioning',
            async () => (await next()('GET', `/v1/installs/${id}`)).body.status === 'active',
            120_000,
          );
        }

        // Back up, restore, copy, transfer: each through the next API.
        const backup = await next()('POST', `/v1/installs/${staging}/backups`, {
          description: 'multi-process',
          notification_emails: [],
        });
        assert.equal(backup.status, 202, JSON.stringify(backup.body));
        const backupOp = operationIdOf(backup);
        await done(backupOp);
        const [made] = await queryRows<{ id: string }>(
          db,
          sql`select id from backups where operation_id = ${backupOp}`,
        );
        assert.ok(made);
        const restore = await next()('POST', `/v1/installs/${staging}/backups/${made.id}/restore`, {
          notification_emails: [],
          create_checkpoint: false,
        });
        assert.equal(restore.status, 202, JSON.stringify(restore.body));
        const copy = await next()('POST', '/v1/install_copy', {
          source_environment_id: w.install.id,
          destination_environment_id: dev,
          notification_emails: [],
        });
        assert.equal(copy.status, 202, JSON.stringify(copy.body));
        await Promise.all([done(restore.body.id), done(copy.body.id)]);
        const transfer = await next()('POST', `/v1/sites/${w.site.id}/site_transfers`, {
          destination_account_id: dest.id,
        });
        assert.equal(transfer.status, 202, JSON.stringify(transfer.body));
        await done(operationIdOf(transfer));

        // Listed alike through both APIs: the three installs, once each, now in the destination.
        for (const call of apis) {
          const listed = await call('GET', `/v1/installs?account_id=${dest.id}&limit=100`);
          assert.equal(listed.status, 200, JSON.stringify(listed.body));
          const ids = listed.body.results.map((i: { id: string }) => i.id).sort();
          assert.deepEqual(ids, [w.install.id, staging, dev].sort());
          const ops = await call('GET', `/v1/installs/${staging}/operations`);
          assert.deepEqual(
            ops.body.results.map((o: { type: string; status: string }) => `${o.type} ${o.status}`).sort(),
            ['create_backup completed', 'provision_install completed', 'restore_backup completed'],
          );
        }

        // Exactly once: one driver call of each kind (three provisions), one record each.
        const after = await appliedCalls(db);
        const delta = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
        assert.deepEqual(
          ['provision', 'backup', 'restore', 'copy', 'move_site'].map((k) => `${k} ${delta(k)}`),
          ['provision 3', 'backup 1', 'restore 1', 'copy 1', 'move_site 1'],
        );
        const transfers = await queryRows(db, sql`select 1 from site_transfers where site_id = ${w.site.id}`);
        assert.equal(transfers.length, 1);
        ctx.diagnostic(`API calls alternated over ${turn} requests`);
        for (const run of running) assert.equal(await stop(run), 0, run.output());
      } finally {
        await Promise.all(running.map((run) => stop(run, 'SIGKILL')));
      }
    });
  });
}
