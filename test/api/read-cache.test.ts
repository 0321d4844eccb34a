import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { TEST_DB } from '../support/databases.js';
import { factories } from '../support/factories.js';
import { ADMIN_TOKEN, buildTestApp, type Json, SECRET_KEY, startApp } from '../support/harness.js';
import { runCli } from '../support/process.js';

// Issue 14: the read cache of rendered GET bodies (src/http/read-cache.ts) is never stale.
const t = await buildTestApp({ env: { AUTH_CACHE_SECONDS: '10' } });
// A second API on the same database, with its own read cache and credential cache.
const other = await startApp(t.database, { env: { AUTH_CACHE_SECONDS: '10' } });
after(() => other.close());
const f = factories(t);

const names = (res: Json) => (res.body.results as Json[]).map((r) => r.name).sort();
const twice = async (get: () => Promise<Json>) => {
  const first = await get();
  const second = await get();
  assert.equal(second.headers.etag, first.headers.etag, 'an unchanged read answers the same body');
  return second;
};

describe('read cache (issue 14)', () => {
  it('a warm listSites, getInstall, listInstalls and listBackups follow every write at once', async () => {
    const w = await f.world();
    const client = w.owner.client;
    const sitesUrl = `/v1/sites?account_id=${w.account.id}`;
    await twice(() => client.get(sitesUrl));
    assert.ok((t.app.readCache?.stats().entries ?? 0) > 0, 'the read cache holds the rendered page');
    await f.site(client, w.account.id, 'Second site');
    assert.deepEqual(names(await client.get(sitesUrl)), [w.site.name, 'Second site'].sort());

    const installUrl = `/v1/installs/${w.install.id}`;
    const pending = await twice(() => client.get(installUrl));
    // Provisioning ends in a job (another connection, no request): the cached body goes with it.
    await t.runJobs();
    const provisioned = await twice(() => client.get(installUrl));
    assert.notEqual(provisioned.body.status, pending.body.status);
    await twice(() => client.get(`/v1/installs?account_id=${w.account.id}`));
    const patched = await client.patch(installUrl, { environment: 'staging' });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.equal((await client.get(installUrl)).body.environment, 'staging');
    const listed = await client.get(`/v1/installs?account_id=${w.account.id}`);
    assert.equal(listed.body.results[0].environment, 'staging');

    // A write by a job (a backup completing) invalidates like a request's write.
    const backupsUrl = `/v1/installs/${w.install.id}/backups`;
    await twice(() => client.get(backupsUrl));
    const started = await client.post(backupsUrl, { description: 'nightly', notification_emails: [] });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const queued = await twice(() => client.get(backupsUrl));
    assert.equal(queued.body.count, 1);
    const operationUrl = new URL(String(started.headers.location)).pathname;
    const before = await twice(() => client.get(operationUrl));
    await t.runJobs();
    const done = await client.get(operationUrl);
    assert.notEqual(done.body.status, before.body.status);
    assert.equal(done.body.status, 'completed');
    assert.notEqual((await client.get(backupsUrl)).headers.etag, queued.headers.etag);
  });

  it('a write made outside the API (plain SQL on the database) is seen by the next warm read', async () => {
    // On PostgreSQL the version triggers catch it; on PGlite also the process's write count, which
    // lets a warm read skip its lookup only while nothing at all was written (Database.writes).
    const w = await f.world();
    const client = w.owner.client;
    const sitesUrl = `/v1/sites?account_id=${w.account.id}`;
    const siteUrl = `/v1/sites/${w.site.id}`;
    for (const name of ['Renamed by SQL', 'Renamed in a transaction']) {
      await twice(() => client.get(sitesUrl));
      await twice(() => client.get(siteUrl));
      const rename = sql`update sites set name = ${name} where id = ${w.site.id}`;
      if (name === 'Renamed by SQL') await t.database.db.execute(rename);
      else await t.database.db.transaction((tx) => tx.execute(rename));
      assert.equal((await client.get(siteUrl)).body.name, name);
      assert.equal((await client.get(sitesUrl)).body.results[0].name, name);
    }
  });

  it('A2 a partial user never gets a body rendered for a full user of the same account', async () => {
    const w = await f.world();
    const hidden = await f.install(w.owner.client, w.account.id, w.site.id, 'staging');
    const full = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const url = `/v1/installs?account_id=${w.account.id}`;
    const fullList = await twice(() => full.client.get(url));
    assert.equal(fullList.body.count, 2);
    const partialList = await partial.client.get(url);
    assert.equal(partialList.status, 200);
    assert.deepEqual(
      (partialList.body.results as Json[]).map((i) => i.id),
      [w.install.id],
    );
    await twice(() => full.client.get(`/v1/installs/${hidden.id}`));
    assert.equal((await partial.client.get(`/v1/installs/${hidden.id}`)).status, 404);
  });

  it('U a removed member gets 404 with a warm cache, through this API and another one', async () => {
    const w = await f.world();
    const member = await f.user([{ account_id: w.account.id, roles: 'full' }]);
    const urls = [`/v1/sites/${w.site.id}`, `/v1/installs/${w.install.id}`];
    const otherClient = (await import('../support/harness.js')).clientFor(other.app, member.authorization);
    for (const url of urls) {
      await twice(() => member.client.get(url));
      await twice(() => otherClient.get(url));
    }
    const removed = await w.owner.client.delete(
      `/v1/accounts/${w.account.id}/account_users/${member.userId}`,
    );
    assert.equal(removed.status, 204, JSON.stringify(removed.body));
    for (const url of urls) {
      assert.equal((await member.client.get(url)).status, 404, url);
      assert.equal((await otherClient.get(url)).status, 404, `${url} through the other API`);
    }
    // Still a member of nothing: the list is empty, not the cached page.
    assert.equal((await otherClient.get('/v1/sites')).body.count, 0);
  });

  if (TEST_DB === 'postgres') {
    it('no cached read is stale across two API processes on one PostgreSQL', async () => {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-read-cache-'));
      const api = runCli(['api'], {
        DATABASE_URL: t.databaseUrl ?? '',
        DATA_DIR: tmp,
        PORT: '0',
        HOST: '127.0.0.1',
        HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
        HOSTPLANE_SECRET_KEY: SECRET_KEY,
      });
      try {
        const [, base] = await api.waitFor(/Hostplane is serving (\S+)\/v1/);
        const w = await f.world();
        const get = async (url: string) => {
          const res = await fetch(`${base}${url}`, { headers: { authorization: w.owner.authorization } });
          return { status: res.status, body: (await res.json()) as Json, etag: res.headers.get('etag') };
        };
        const siteUrl = `/v1/sites/${w.site.id}`;
        const listUrl = `/v1/sites?account_id=${w.account.id}`;
        for (let round = 0; round < 20; round++) {
          // Warm process B's cache, write through process A, read through B right after A's answer.
          assert.equal((await get(siteUrl)).status, 200);
          await get(listUrl);
          const name = `Round ${round}`;
          assert.equal((await w.owner.client.patch(siteUrl, { name })).status, 200);
          assert.equal((await get(siteUrl)).body.name, name, `round ${round}: getSite`);
          assert.equal((await get(listUrl)).body.results[0].name, name, `round ${round}: listSites`);
        }
        const unchanged = await get(listUrl);
        assert.equal((await get(listUrl)).etag, unchanged.etag);
      } finally {
        api.child.kill('SIGTERM');
        await api.exited;
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    });
  }
});
