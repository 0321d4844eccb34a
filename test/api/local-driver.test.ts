import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import { localInstalls } from '../../src/db/schema.js';
import { JOBS } from '../../src/jobs/catalog.js';
import { resealSecrets } from '../../src/reseal.js';
import { createSecretBox } from '../../src/secrets.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { mailOf, operationOf, readyInstall, readyWorld } from '../support/jobs.js';
import {
  checksums,
  duBytes,
  type LocalDriverProbe,
  localHosting,
  writeSite,
} from '../support/local-hosting.js';

// Issue 16: HOSTING_DRIVER=local on real files (a HOSTING_ROOT of this file's own) and the MariaDB
// server of the machine (databases and users named from install ids, dropped after the file).
const host = await localHosting();
const t = await buildTestApp({ env: { ...host.env, PUBLIC_URL: 'https://api.hostplane.test' } });
const f = factories(t);
const driver = t.app.services.driver as unknown as LocalDriverProbe;

async function seedDatabase(installId: string, posts: string[]) {
  const conn = await host.asInstall(driver, installId);
  try {
    await conn.query('CREATE TABLE wp_posts (id INT PRIMARY KEY, title VARCHAR(200)) ENGINE=InnoDB');
    await conn.query('CREATE TABLE wp_options (name VARCHAR(64) PRIMARY KEY, value TEXT) ENGINE=InnoDB');
    for (const [i, title] of posts.entries())
      await conn.query('INSERT INTO wp_posts VALUES (?, ?)', [i + 1, title]);
    await conn.query("INSERT INTO wp_options VALUES ('blogname', ?)", [`blog ${installId.slice(0, 8)}`]);
  } finally {
    await conn.end();
  }
}

async function backupOf(w: Json) {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'before the changes',
    notification_emails: ['ops@example.test'],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await t.runJobs();
  const backup = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${res.body.id}`);
  assert.equal(backup.body.status, 'completed', JSON.stringify(backup.body));
  return { ...backup.body, operation_id: res.headers.location?.toString().split('/').pop() };
}

describe('local hosting driver (issue 16)', () => {
  it('I7 provisioning creates the document root with a placeholder, the private area, the database and its user', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    const install = await w.owner.client.get(`/v1/installs/${w.install.id}`);
    assert.equal(install.body.status, 'active');
    const index = await fs.readFile(path.join(p.public, 'index.html'), 'utf8');
    assert.match(index, /<html/);
    assert.doesNotMatch(index, /<\?php/);
    assert.equal((await fs.stat(p.private)).mode & 0o777, 0o700);
    assert.ok(await host.databaseExists(w.install.id));
    assert.ok(await host.userExists(w.install.id));
    // The install's own user logs in to its database (the sealed password opens).
    const conn = await host.asInstall(driver, w.install.id);
    const [rows] = await conn.query('SELECT DATABASE() AS db');
    await conn.end();
    assert.equal((rows as Json)[0].db, `hp_${w.install.id.replace(/-/g, '')}`);
  });

  it('hostplane reseal moves the database passwords to the new key (the same password opens under it)', async () => {
    const w = await readyWorld(t, f);
    const context = `local-install:${w.install.id}`;
    const sealedOf = async () =>
      (await t.database.db.select().from(localInstalls).where(eq(localInstalls.install_id, w.install.id)))[0]
        ?.password_sealed ?? '';
    const password = createSecretBox(SECRET_KEY)
      .open(await sealedOf(), context)
      .toString('utf8');
    const next = `rotated-${SECRET_KEY}`;
    const counts = await resealSecrets(t.database, SECRET_KEY, next);
    assert.ok(counts.resealed >= 1, JSON.stringify(counts));
    const after = await sealedOf();
    assert.equal(createSecretBox(next).open(after, context).toString('utf8'), password);
    assert.throws(() => createSecretBox(SECRET_KEY).open(after, context));
    // Back to the key this file's app runs with, so the other tests can open it.
    await resealSecrets(t.database, next, SECRET_KEY);
  });

  it('B2 R1 R2 a backup, then changes, then a restore gives back the exact files and rows', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'original');
    await seedDatabase(w.install.id, ['hello', 'world']);
    const files = await checksums(p.public);
    const [posts, options] = [
      await host.rows(w.install.id, 'wp_posts'),
      await host.rows(w.install.id, 'wp_options'),
    ];
    const backup = await backupOf(w);
    assert.equal(backup.wordpress_version, '6.5.2');
    const [dir] = await fs.readdir(p.backups);
    const manifest = JSON.parse(
      await fs.readFile(path.join(p.backups, String(dir), 'manifest.json'), 'utf8'),
    );
    assert.deepEqual(Object.keys(manifest.database.tables), ['wp_options', 'wp_posts']);
    assert.equal(manifest.files.tree_bytes, duBytes(p.public));
    // B3: the backup's operation reports the real size (document root + tables) and the checksums.
    const size = duBytes(p.public) + (await host.databaseBytes(w.install.id));
    const [mail] = await mailOf(t, backup.operation_id);
    assert.ok(mail.text.includes(`(${size} bytes)`), mail.text);
    assert.ok(mail.text.includes(manifest.files.sha256) && mail.text.includes(manifest.database.sha256));

    // Changes to files and database.
    await writeSite(p.public, '6.6.0', 'changed');
    await fs.writeFile(path.join(p.public, 'new.txt'), 'added later');
    await fs.rm(path.join(p.public, 'index.html'));
    const conn = await host.asInstall(driver, w.install.id);
    await conn.query("UPDATE wp_posts SET title = 'edited' WHERE id = 1");
    await conn.query('DELETE FROM wp_posts WHERE id = 2');
    await conn.query('DROP TABLE wp_options');
    await conn.query('CREATE TABLE wp_spam (id INT PRIMARY KEY)');
    await conn.end();

    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    assert.deepEqual(await checksums(p.public), files);
    assert.deepEqual(await host.tables(w.install.id), ['wp_options', 'wp_posts']);
    assert.deepEqual(await host.rows(w.install.id, 'wp_posts'), posts);
    assert.deepEqual(await host.rows(w.install.id, 'wp_options'), options);
    assert.equal((await w.owner.client.get(`/v1/installs/${w.install.id}`)).body.wp_version, '6.5.2');
    // R2: the checkpoint holds the changed state.
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/backups`);
    const checkpoint = list.body.results.find((b: Json) => b.id !== backup.id);
    assert.equal(checkpoint.status, 'completed');
    assert.equal(checkpoint.wordpress_version, '6.6.0');
    assert.equal(await driver.countCompleted(w.install.id, 'restore'), 1);
    // No staging left behind.
    assert.deepEqual(await fs.readdir(path.join(host.root, 'staging')).catch(() => []), []);
  });

  it('R1 restore_database false brings back the files and leaves the database alone', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'original');
    await seedDatabase(w.install.id, ['kept']);
    const files = await checksums(p.public);
    const backup = await backupOf(w);
    await writeSite(p.public, '6.6.0', 'changed');
    const conn = await host.asInstall(driver, w.install.id);
    await conn.query("INSERT INTO wp_posts VALUES (9, 'after the backup')");
    await conn.end();
    const rows = await host.rows(w.install.id, 'wp_posts');
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      restore_database: false,
      create_checkpoint: false,
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    assert.deepEqual(await checksums(p.public), files);
    assert.deepEqual(await host.rows(w.install.id, 'wp_posts'), rows);
  });

  it('C2 C3 a copy with db_tables copies only those tables (files kept when include_files is false); a full copy makes the destination equal', async () => {
    const w = await readyWorld(t, f);
    const source = w.install;
    const destination = await readyInstall(t, f, w, 'staging');
    const [from, to] = [host.paths(source.id), host.paths(destination.id)];
    await writeSite(from.public, '6.4.0', 'source');
    await writeSite(to.public, '6.3.0', 'destination');
    await seedDatabase(source.id, ['from source']);
    await seedDatabase(destination.id, ['dest one', 'dest two']);
    const destConn = await host.asInstall(driver, destination.id);
    await destConn.query('CREATE TABLE wp_users (id INT PRIMARY KEY)');
    await destConn.query('INSERT INTO wp_users VALUES (7)');
    await destConn.end();
    const destFiles = await checksums(to.public);
    const destOptions = await host.rows(destination.id, 'wp_options');

    const partial = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
      custom_options: { include_files: false, db_tables: ['wp_posts', 'wp_missing'] },
    });
    assert.equal(partial.status, 202, JSON.stringify(partial.body));
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, partial)).status, 'completed');
    assert.deepEqual(await host.rows(destination.id, 'wp_posts'), await host.rows(source.id, 'wp_posts'));
    assert.deepEqual(await host.rows(destination.id, 'wp_options'), destOptions);
    assert.deepEqual(await host.rows(destination.id, 'wp_users'), [{ id: 7 }]);
    assert.deepEqual(await checksums(to.public), destFiles);

    const full = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: source.id,
      destination_environment_id: destination.id,
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, full)).status, 'completed');
    assert.deepEqual(await checksums(to.public), await checksums(from.public));
    assert.deepEqual(await host.tables(destination.id), ['wp_options', 'wp_posts']);
    assert.deepEqual(await host.rows(destination.id, 'wp_options'), await host.rows(source.id, 'wp_options'));
    assert.equal((await w.owner.client.get(`/v1/installs/${destination.id}`)).body.wp_version, '6.4.0');
  });

  it("issue 28 finding 2 (LOCAL_WEB=off: root's trees): no setuid/setgid bit comes out of a copy or a restore, and a backup holding a device file is refused by its restore", async () => {
    const w = await readyWorld(t, f);
    const destination = await readyInstall(t, f, w, 'staging');
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.4.0', 'setuid');
    const uploads = path.join(p.public, 'wp-content', 'uploads');
    await fs.copyFile('/bin/sh', path.join(uploads, 'sh'));
    await fs.chmod(path.join(uploads, 'sh'), 0o4755);
    await fs.copyFile('/bin/sh', path.join(uploads, 'sg'));
    await fs.chmod(path.join(uploads, 'sg'), 0o2755);
    const withSetuid = await backupOf(w);
    const setIds = () =>
      execFileSync('find', [host.root, '-perm', '/6000', '-print'], { encoding: 'utf8' }).trim();
    const copy = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: w.install.id,
      destination_environment_id: destination.id,
      custom_options: { include_files: true, include_db: false },
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, copy)).status, 'completed');
    const restore = (backupId: string) =>
      w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backupId}/restore`, {
        notification_emails: [],
        restore_database: false,
        create_checkpoint: false,
      });
    const restored = await restore(withSetuid.id);
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, restored)).status, 'completed');
    assert.equal(setIds(), '', 'no setuid/setgid file under HOSTING_ROOT');
    const sh = await fs.stat(path.join(host.paths(destination.id).public, 'wp-content', 'uploads', 'sh'));
    assert.equal(sh.mode & 0o7777, 0o755, 'the copy keeps the file, without the bit');

    // A device file (only root can make one) in a backup: its restore fails and changes nothing.
    execFileSync('mknod', [path.join(p.public, 'null'), 'c', '1', '3']);
    const withDevice = await backupOf(w);
    await fs.rm(path.join(p.public, 'null'));
    const before = await checksums(p.public);
    const refused = await restore(withDevice.id);
    await t.runJobs();
    const op = await operationOf(w.owner.client, refused);
    assert.equal(op.status, 'failed', JSON.stringify(op));
    assert.deepEqual(await checksums(p.public), before);
    assert.deepEqual(await fs.readdir(path.join(host.root, 'staging')).catch(() => []), []);
  });

  it('R1 a restore that fails half-way (after staging, before the swap) leaves the install as it was, and no staging behind', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'original');
    await seedDatabase(w.install.id, ['one']);
    const backup = await backupOf(w);
    await writeSite(p.public, '6.6.0', 'changed');
    const conn = await host.asInstall(driver, w.install.id);
    await conn.query("UPDATE wp_posts SET title = 'changed'");
    await conn.end();
    const files = await checksums(p.public);
    const rows = await host.rows(w.install.id, 'wp_posts');
    // Every attempt fails after its staging is ready (test-mode fault, taken half-way).
    const faulted = await t.admin.post('/admin/v1/faults', {
      operation: 'restore',
      count: JOBS.restore_backup.retryLimit + 1,
      mode: 'fail',
    });
    assert.equal(faulted.status, 200);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    assert.deepEqual((await t.admin.get('/admin/v1/faults')).body.faults, []);
    assert.equal((await operationOf(w.owner.client, res)).status, 'failed');
    assert.deepEqual(await checksums(p.public), files);
    assert.deepEqual(await host.rows(w.install.id, 'wp_posts'), rows);
    assert.deepEqual(await fs.readdir(path.join(host.root, 'staging')), []);
    const [staged] = await host.admin.query(
      'SELECT 1 FROM information_schema.schemata WHERE schema_name = ?',
      [`hps_${w.install.id.replace(/-/g, '')}`],
    );
    assert.deepEqual(staged, []);
  });

  it('downloadArchive serves the backup itself: its files archive, database dump and manifest, checksums intact', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'archived');
    await seedDatabase(w.install.id, ['kept']);
    await backupOf(w);
    const list = await w.owner.client.get(`/v1/installs/${w.install.id}/archives`);
    const uri = String(list.body.results[0].download_uri);
    const res = await t.anonymous.get(uri.slice('https://api.hostplane.test'.length));
    assert.equal(res.status, 200);
    // Issue 28 finding 9b: an uncompressed tar of the artefacts (the files archive is gzip already).
    assert.equal(res.headers['content-type'], 'application/x-tar');
    assert.equal(Number(res.headers['content-length']), res.raw.rawPayload.length);
    const out = await fs.mkdtemp(path.join(host.root, 'download-'));
    await fs.writeFile(path.join(out, 'a.tar'), res.raw.rawPayload);
    execFileSync('tar', ['-xf', path.join(out, 'a.tar'), '-C', out]);
    const manifest = JSON.parse(await fs.readFile(path.join(out, 'manifest.json'), 'utf8'));
    const sums = await checksums(out);
    assert.equal(sums['files.tar.gz'], manifest.files.sha256);
    assert.equal(sums['database.sql'], manifest.database.sha256);
    assert.match(await fs.readFile(path.join(out, 'database.sql'), 'utf8'), /CREATE TABLE `wp_posts`/);
  });

  it('M7 disk usage is the du -sb of the install directory and the information_schema bytes of its database', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'measured');
    await seedDatabase(w.install.id, ['a', 'b', 'c']);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/usage/refresh_disk_usage`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await t.runJobs();
    const usage = await w.owner.client.get(`/v1/installs/${w.install.id}/usage`);
    assert.equal(usage.status, 200);
    assert.equal(Number(usage.body.metrics[0].storage_file_bytes), duBytes(p.dir));
    assert.equal(
      Number(usage.body.metrics[0].storage_database_bytes),
      await host.databaseBytes(w.install.id),
    );
  });

  it('purge_cache empties the install cache directory', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await fs.writeFile(path.join(p.cache, 'page.html'), 'cached');
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/purge_cache`, { type: 'page' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    assert.deepEqual(await fs.readdir(p.cache), []);
  });

  it('deleting an install removes its directory, backups, database and user', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await seedDatabase(w.install.id, ['gone soon']);
    await backupOf(w);
    const res = await w.owner.client.delete(`/v1/installs/${w.install.id}`);
    assert.equal(res.status, 204);
    await t.runJobs();
    await assert.rejects(fs.stat(p.dir), { code: 'ENOENT' });
    await assert.rejects(fs.stat(p.backups), { code: 'ENOENT' });
    assert.equal(await host.databaseExists(w.install.id), false);
    assert.equal(await host.userExists(w.install.id), false);
  });
});
