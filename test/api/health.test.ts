import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { type Database, type DbBudget, openDatabase, queryRows } from '../../src/db/client.js';
import { assertErrorBody } from '../support/assertions.js';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { buildTestApp, clientFor, type Res, type StartedApp, startApp } from '../support/harness.js';
import { captureLogs, settle } from '../support/logs.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const t = await buildTestApp();
const f = factories(t);

describe('health probes', () => {
  it('G11 /healthz answers 200 {status:"ok"} without credentials', async () => {
    const res = await t.anonymous.get('/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
    assert.match(String(res.headers['content-type']), /^application\/json/);
  });

  it('G11 /readyz answers 200 {status:"ok"} when the database answers', async () => {
    const res = await t.anonymous.get('/readyz');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
  });
});

/**
 * This file's database opened a second time through a TCP proxy that the tests cut and restore, and an
 * app on it whose logs go to `logs`.
 */
async function proxiedApp(logs: ReturnType<typeof captureLogs>, budget?: DbBudget) {
  assert.ok(t.databaseUrl);
  const direct = new URL(t.databaseUrl);
  const proxy = await startTcpProxy(Number(direct.port || 5432), direct.hostname);
  const proxied = new URL(t.databaseUrl);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  const url = proxied.toString();
  const database = await openDatabase({ kind: 'postgres', url, poolSize: 5, ...(budget && { budget }) });
  const api = await startApp(database, { logStream: logs.stream });
  const close = async () => {
    await api.close();
    await database.close();
    await proxy.close();
  };
  return { proxy, api, close };
}

// Only PostgreSQL is reached over the network; the embedded PGlite cannot become unreachable.
if (TEST_DB === 'postgres') {
  describe('PostgreSQL unreachable and back (G11)', () => {
    let proxy: TcpProxy;
    let api: StartedApp;
    let close: () => Promise<void>;
    const logs = captureLogs();
    before(async () => {
      ({ proxy, api, close } = await proxiedApp(logs));
    });
    after(() => close());

    /** An owner whose credential the proxied app has verified (cached) or never seen (uncached). */
    async function callers() {
      const w = await f.world();
      const cached = clientFor(api.app, w.owner.authorization);
      assert.equal((await cached.get('/v1/sites')).status, 200); // verified once: now cached
      const fresh = await f.user([{ account_id: w.account.id, roles: 'owner' }]);
      return { w, cached, uncached: clientFor(api.app, fresh.authorization) };
    }

    function assertUnavailable(res: Res, what: string) {
      assert.equal(res.status, 503, `${what}: ${res.raw.body}`);
      assertErrorBody(res, 503);
      assert.deepEqual(Object.keys(res.body), ['message'], what);
      assert.match(String(res.headers['x-request-id']), /.+/, what);
    }

    for (const mode of ['refuse', 'blackhole'] as const) {
      it(`G11 database ${mode === 'refuse' ? 'refusing connections' : 'host gone silent'}: 503 JSON for reads, writes, auth and /readyz, never 500; 200 again once it is back`, {
        timeout: 30_000,
      }, async () => {
        const { w, cached, uncached } = await callers();
        const write = { name: 'During outage', account_id: w.account.id };

        await proxy.cut(mode);
        logs.clear();
        // All at once: with a silent host each waits for the pool's connect timeout.
        const [read, readUncached, created, ready, healthy] = await Promise.all([
          cached.get('/v1/sites'),
          uncached.get('/v1/sites'),
          cached.post('/v1/sites', write),
          api.anonymous.get('/readyz'),
          api.anonymous.get('/healthz'),
        ]);
        assertUnavailable(read, 'cached credential, GET /v1/sites');
        assertUnavailable(readUncached, 'uncached credential, GET /v1/sites');
        assertUnavailable(created, 'POST /v1/sites');
        assert.doesNotMatch(created.body.message, /may have been made/, 'nothing was committed');
        assertUnavailable(ready, '/readyz');
        assert.equal(healthy.status, 200, '/healthz does not depend on the database');
        await settle();
        // Logged as a dependency problem (warn), not as an unhandled error.
        assert.equal(logs.lines().filter((line) => line.level >= 50).length, 0, logs.text());
        assert.ok(logs.lines().some((line) => line.msg === 'dependency unavailable'));

        await proxy.restore();
        // The same app instance, no restart: the pool opens new connections by itself.
        assert.equal((await api.anonymous.get('/readyz')).status, 200);
        assert.equal((await cached.get('/v1/sites')).status, 200);
        assert.equal((await uncached.get('/v1/sites')).status, 200);
        const createdAfter = await cached.post('/v1/sites', write);
        assert.equal(createdAfter.status, 201, JSON.stringify(createdAfter.body));
        const listed = await uncached.get(`/v1/sites?account_id=${w.account.id}`);
        assert.deepEqual(
          listed.body.results.map((s: { name: string }) => s.name).sort(),
          [w.site.name, 'During outage'].sort(),
          'the write refused during the outage did not happen',
        );
      });
    }

    it('G11 the database going away between requests of one client: each request is 503 or 200, never 500', {
      timeout: 30_000,
    }, async () => {
      const { cached } = await callers();
      const statuses: number[] = [];
      for (let round = 0; round < 3; round++) {
        statuses.push((await cached.get('/v1/sites')).status);
        await proxy.cut('refuse');
        statuses.push((await cached.get('/v1/sites')).status);
        statuses.push((await api.anonymous.get('/readyz')).status);
        await proxy.restore();
      }
      statuses.push((await cached.get('/v1/sites')).status);
      assert.deepEqual(statuses, [200, 503, 503, 200, 503, 503, 200, 503, 503, 200]);
    });
  });
}

if (TEST_DB === 'postgres') {
  describe('a COMMIT whose answer is lost (G11, decision 246)', () => {
    let proxy: TcpProxy;
    let api: StartedApp;
    let close: () => Promise<void>;
    const logs = captureLogs();
    // A request budget of 3 s: an answer is given up 1 s after it.
    before(async () => {
      ({ proxy, api, close } = await proxiedApp(logs, { acquireTimeoutMs: 2000, statementTimeoutMs: 3000 }));
    });
    after(() => close());

    /**
     * Makes the commit of one row of `table` (where `condition` holds for `new`) take a second: a
     * deferred trigger, so that the test can cut the answers while the database is committing it.
     */
    async function slowCommit(table: string, condition: string) {
      await t.database.db.execute(`
        create function hp_test_slow_commit() returns trigger language plpgsql as $$
        begin if ${condition} then perform pg_sleep(1); end if; return null; end $$;
        create constraint trigger hp_test_slow_commit after insert on ${table}
          deferrable initially deferred for each row execute function hp_test_slow_commit();`);
      return () =>
        t.database.db.execute(
          `drop trigger hp_test_slow_commit on ${table}; drop function hp_test_slow_commit();`,
        );
    }

    /** Sends `request`, waits until the database is committing its row, cuts the answers: its answer. */
    async function cutWhileCommitting(request: Promise<Res>): Promise<Res> {
      let early: Res | null = null;
      void request.then((res) => {
        early = res;
      });
      for (let i = 0; ; i++) {
        assert.equal(early, null, `answered before its commit was seen: ${(early as Res | null)?.raw.body}`);
        const [row] = await queryRows<{ n: number }>(
          t.database.db,
          sql`select count(*)::int as n from pg_stat_activity where state = 'active' and wait_event = 'PgSleep'`,
        );
        if (row?.n) break;
        assert.ok(i < 400, 'the commit reached the database');
        await new Promise((r) => setTimeout(r, 25));
      }
      await proxy.cut('mute');
      try {
        return await request;
      } finally {
        await proxy.restore();
      }
    }

    function assertMayHaveBeenMade(res: Res) {
      assert.equal(res.status, 503, res.raw.body);
      assertErrorBody(res, 503);
      assert.match(res.body.message, /may have been made/);
      assert.match(String(res.headers['retry-after']), /^\d+$/);
    }

    it('G11 a write committed on its own (POST /v1/sites) whose answer is lost after the database received it: 503 saying the change may have been made (it was), not "nothing was changed"', {
      timeout: 30_000,
    }, async () => {
      const w = await f.world();
      const owner = clientFor(api.app, w.owner.authorization);
      assert.equal((await owner.get('/v1/sites')).status, 200);
      const name = 'Committed while cut';
      const drop = await slowCommit('sites', `new.name = '${name}'`);
      try {
        logs.clear();
        assertMayHaveBeenMade(
          await cutWhileCommitting(owner.post('/v1/sites', { name, account_id: w.account.id })),
        );
        await settle();
        assert.ok(
          logs.lines().some((line) => line.msg === 'commit outcome unknown'),
          logs.text(),
        );
      } finally {
        await drop();
      }
      // What the answer said could be true is: the site was made.
      const listed = await owner.get(`/v1/sites?account_id=${w.account.id}`);
      assert.ok(
        listed.body.results.some((s: { name: string }) => s.name === name),
        'the site was committed',
      );
    });

    it('G11 a transaction (POST backups: its operation and job) whose COMMIT answer is lost: 503 saying the change may have been made (it was)', {
      timeout: 30_000,
    }, async () => {
      const w = await f.world();
      await t.runJobs(); // the install provisioned
      const owner = clientFor(api.app, w.owner.authorization);
      const drop = await slowCommit(
        'operations',
        `new.install_id = '${w.install.id}' and new.type = 'create_backup'`,
      );
      try {
        const res = await cutWhileCommitting(
          owner.post(`/v1/installs/${w.install.id}/backups`, { description: 'cut', notification_emails: [] }),
        );
        assertMayHaveBeenMade(res);
      } finally {
        await drop();
      }
      const [made] = await queryRows<{ n: number }>(
        t.database.db,
        sql`select count(*)::int as n from operations where install_id = ${w.install.id} and type = 'create_backup'`,
      );
      assert.equal(made?.n, 1, 'the backup operation was committed');
    });
  });

  describe('a statement that outlives its budget (G11)', () => {
    let database: Database;
    let api: StartedApp;
    const logs = captureLogs();

    // This file's database opened again with a short API statement budget, as `hostplane api` opens
    // its request pool (DB_API_STATEMENT_TIMEOUT_MS).
    before(async () => {
      assert.ok(t.databaseUrl);
      database = await openDatabase({
        kind: 'postgres',
        url: t.databaseUrl,
        poolSize: 5,
        budget: { acquireTimeoutMs: 2000, statementTimeoutMs: 300 },
      });
      api = await startApp(database, { logStream: logs.stream });
    });
    after(async () => {
      await api.close();
      await database.close();
    });

    it('G11 a read waiting on a lock past the statement timeout (57014) is a 503 with Retry-After, not a 500', {
      timeout: 30_000,
    }, async () => {
      const w = await f.world();
      const owner = clientFor(api.app, w.owner.authorization);
      assert.equal((await owner.get('/v1/sites')).status, 200);
      // Another session holds the sites table for longer than the budget of one statement.
      const holder = await openDatabase({ kind: 'postgres', url: t.databaseUrl ?? '', poolSize: 1 });
      try {
        await holder.db.transaction(async (tx) => {
          await tx.execute('lock table sites in access exclusive mode');
          const res = await owner.get(`/v1/sites?account_id=${w.account.id}&limit=3`);
          assert.equal(res.status, 503, res.raw.body);
          assertErrorBody(res, 503);
          assert.match(String(res.headers['retry-after']), /^\d+$/);
        });
      } finally {
        await holder.close();
      }
      assert.equal((await owner.get('/v1/sites')).status, 200);
    });
  });
}
