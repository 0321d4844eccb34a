import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { JOBS } from '../../src/jobs/catalog.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, type Res } from '../support/harness.js';
import { readyWorld } from '../support/jobs.js';

const t = await buildTestApp({ env: { PUBLIC_URL: 'https://api.hostplane.test' } });
const f = factories(t);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-archives-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const listUrl = (installId: string) => `/v1/installs/${installId}/archives`;

async function backup(w: Json, description = 'nightly', emails: string[] = ['ops@example.test']) {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description,
    notification_emails: emails,
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body;
}

/** A world with one completed backup, and its archive as listArchives shows it. */
async function completed() {
  const w = await readyWorld(t, f);
  const made = await backup(w);
  await t.runJobs();
  const list = await w.owner.client.get(listUrl(w.install.id));
  assert.equal(list.status, 200, JSON.stringify(list.body));
  return { w, backupId: made.id as string, archive: list.body.results[0] as Json };
}

/** The download_uri as a path and query that app.inject takes (the base is PUBLIC_URL). */
const local = (uri: string) => {
  assert.ok(uri.startsWith('https://api.hostplane.test/v1/'), uri);
  return uri.slice('https://api.hostplane.test'.length);
};

/** Unpacks a tar answer with the system's tar and returns its files. */
function unpack(res: Res): Record<string, string> {
  const target = fs.mkdtempSync(path.join(dir, 'x-'));
  const file = path.join(target, 'archive.tar');
  fs.writeFileSync(file, res.raw.rawPayload);
  execFileSync('tar', ['-xf', file, '-C', target]);
  const names = execFileSync('tar', ['-tf', file], { encoding: 'utf8' }).trim().split('\n');
  return Object.fromEntries(names.map((n) => [n, fs.readFileSync(path.join(target, n), 'utf8')]));
}

describe('listArchives', () => {
  it('listArchives shows one archive per backup: requested with no link, then completed with a signed download_uri', async () => {
    const w = await readyWorld(t, f);
    const made = await backup(w, 'before launch', ['a@example.test', 'b@example.test']);
    const pending = await w.owner.client.get(listUrl(w.install.id));
    assert.equal(pending.status, 200);
    assert.equal(pending.body.count, 1);
    assert.deepEqual(pending.body.results[0], {
      id: made.id,
      backup: { id: made.id },
      notification_emails: ['a@example.test', 'b@example.test'],
      state: 'requested',
      create_time: made.create_time,
      complete_time: null,
      abort_time: null,
      download_uri: null,
    });
    await t.runJobs();
    const done = await w.owner.client.get(listUrl(w.install.id));
    const archive = done.body.results[0];
    assert.equal(archive.state, 'completed');
    assert.equal(typeof archive.start_time, 'string');
    assert.equal(typeof archive.complete_time, 'string');
    assert.equal(archive.abort_time, null);
    assert.match(
      archive.download_uri,
      new RegExp(
        `^https://api\\.hostplane\\.test/v1/installs/${w.install.id}/archives/${made.id}/download\\?expires=\\d+&signature=[A-Za-z0-9_-]{43}$`,
      ),
    );
    const expires = Number(new URL(archive.download_uri).searchParams.get('expires'));
    assert.equal(expires, Math.floor(t.clock.now().getTime() / 1000) + 3600, 'valid for one hour');
  });

  it('listArchives: a backup whose every attempt fails is an aborted archive with abort_time and no link', async () => {
    const w = await readyWorld(t, f);
    const faulted = await t.admin.post('/admin/v1/faults', {
      operation: 'backup',
      count: JOBS.create_backup.retryLimit + 1,
      mode: 'fail',
    });
    assert.equal(faulted.status, 200);
    await backup(w, 'doomed');
    await t.runJobs();
    const [archive] = (await w.owner.client.get(listUrl(w.install.id))).body.results;
    assert.equal(archive.state, 'aborted');
    assert.equal(typeof archive.abort_time, 'string');
    assert.equal(archive.complete_time, null);
    assert.equal(archive.download_uri, null);
  });

  it('G5/G6 listArchives pages newest first in the list envelope; a bad limit is a 400', async () => {
    const w = await readyWorld(t, f);
    const first = await backup(w, 'one');
    await t.runJobs();
    t.clock.advance(1000);
    const second = await backup(w, 'two');
    await t.runJobs();
    const page = await w.owner.client.get(`${listUrl(w.install.id)}?limit=1`);
    assert.equal(page.body.count, 2);
    assert.equal(page.body.results[0].id, second.id);
    assert.ok(page.body.next);
    const next = await w.owner.client.get(`${listUrl(w.install.id)}?limit=1&offset=1`);
    assert.equal(next.body.results[0].id, first.id);
    assert.equal((await w.owner.client.get(`${listUrl(w.install.id)}?limit=101`)).status, 400);
  });
});

describe('downloadArchive', () => {
  it('downloadArchive serves the archive to the link holder: a tar (issue 28 finding 9b: uncompressed, streamed, with its Content-Length) that says it is simulated, with the backup manifest', async () => {
    const { w, backupId, archive } = await completed();
    const res = await t.anonymous.get(local(archive.download_uri));
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/x-tar');
    assert.match(String(res.headers['content-disposition']), /^attachment; filename=".+\.tar"$/);
    assert.equal(Number(res.headers['content-length']), res.raw.rawPayload.length);
    assert.equal(res.headers['cache-control'], 'private, no-store');
    const files = unpack(res);
    assert.deepEqual(Object.keys(files).sort(), ['README.txt', 'manifest.json']);
    assert.match(files['README.txt'] ?? '', /simulated hosting driver/);
    const manifest = JSON.parse(files['manifest.json'] ?? '{}');
    assert.equal(manifest.simulated, true);
    assert.equal(manifest.backup.id, backupId);
    assert.equal(manifest.install.id, w.install.id);
    assert.ok(manifest.backup.file_bytes > 0);
    assert.ok(Object.keys(manifest.backup.database_tables).includes('wp_posts'));
  });

  it('downloadArchive: a link past its hour is 403 expired; a fresh list gives a working one', async () => {
    const { w, archive } = await completed();
    t.clock.advance(3601 * 1000);
    const res = await t.anonymous.get(local(archive.download_uri));
    assert.equal(res.status, 403);
    assert.match(res.body.message, /expired/);
    const fresh = (await w.owner.client.get(listUrl(w.install.id))).body.results[0];
    assert.equal((await t.anonymous.get(local(fresh.download_uri))).status, 200);
  });

  it('downloadArchive: an altered signature, expiry, archive or install id is 403; missing parameters are 400', async () => {
    const { w, archive } = await completed();
    const other = await completed();
    const url = new URL(archive.download_uri);
    const sig = url.searchParams.get('signature') ?? '';
    const expires = Number(url.searchParams.get('expires'));
    const base = `/v1/installs/${w.install.id}/archives/${archive.id}/download`;
    const flipped = `${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`;
    const refused = [
      `${base}?expires=${expires}&signature=${flipped}`,
      `${base}?expires=${expires + 3600}&signature=${sig}`,
      `/v1/installs/${w.install.id}/archives/${other.archive.id}/download?expires=${expires}&signature=${sig}`,
      `/v1/installs/${other.w.install.id}/archives/${archive.id}/download?expires=${expires}&signature=${sig}`,
      `${base}?expires=${expires}&signature=${sig.slice(0, 20)}`,
    ];
    for (const u of refused) {
      const res = await t.anonymous.get(u);
      assert.equal(res.status, 403, `${u} ${JSON.stringify(res.body)}`);
      assert.match(res.body.message, /not valid/);
    }
    for (const u of [
      base,
      `${base}?expires=${expires}`,
      `${base}?signature=${sig}`,
      `${base}?expires=x&signature=${sig}`,
    ]) {
      const res = await t.anonymous.get(u);
      assert.equal(res.status, 400, `${u} ${JSON.stringify(res.body)}`);
      assert.equal(res.body.errors[0].resource, 'archive');
    }
  });

  it('downloadArchive: once the backup or its install is deleted, a still-valid link is 404', async () => {
    const { w, archive } = await completed();
    assert.equal((await w.owner.client.delete(`/v1/installs/${w.install.id}`)).status, 204);
    const res = await t.anonymous.get(local(archive.download_uri));
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { message: 'Not Found' });
  });
});

describe('authorization of the archive routes (G2, G4, A2)', () => {
  it('G2/G4/A2 listArchives needs Basic auth and visibility; downloadArchive needs only its signed link', async () => {
    const { w, archive } = await completed();
    const foreign = await readyWorld(t, f);
    const outsider = await f.user([{ account_id: w.account.id, roles: 'partial', install_ids: [] }]);
    const routes = [
      {
        operationId: 'listArchives',
        url: listUrl(w.install.id),
        anonymous: 401,
        foreign: 404,
        outsider: 404,
      },
      {
        operationId: 'downloadArchive',
        url: local(archive.download_uri),
        anonymous: 200,
        foreign: 200,
        outsider: 200,
      },
    ];
    for (const route of routes) {
      assert.equal((await t.anonymous.get(route.url)).status, route.anonymous, route.operationId);
      assert.equal((await foreign.owner.client.get(route.url)).status, route.foreign, route.operationId);
      assert.equal((await outsider.client.get(route.url)).status, route.outsider, route.operationId);
    }
    // A2: a partial member of the install lists its archives (no 403 for any role).
    const partial = await f.user([
      { account_id: w.account.id, roles: 'partial', install_ids: [w.install.id] },
    ]);
    const listed = await partial.client.get(listUrl(w.install.id));
    assert.equal(listed.status, 200);
    assert.equal(listed.body.count, 1);
  });
});
