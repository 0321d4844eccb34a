// test-db: postgres (the subject is the local driver's files and MariaDB, not the control plane's database)
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type mysql from 'mysql2/promise';
import type {
  DriverResult,
  HostingDriver,
  InstallRef,
  RestoreResult,
  Snapshot,
} from '../../src/drivers/driver.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { readyInstall, readyWorld } from '../support/jobs.js';
import { type LocalDriverProbe, localHosting, slug, writeSite } from '../support/local-hosting.js';

// Issue 30 (decision #235): a move's final sync, on the local driver. The copy's backup keeps its
// tree's index, the copy's restore answers the tables' fingerprints; the final backup then holds only
// what changed since, and its restore applies it to the copy and checks the whole install against the
// source. Here the source and the copy are two installs of one machine (a move's are one install on
// two servers: fleet-netns.test.ts), so the copy's triggers have another definer, as across servers
// they may.
const host = await localHosting();
const t = await buildTestApp({ env: { ...host.env } });
const f = factories(t);
const driver = t.app.services.driver as HostingDriver & LocalDriverProbe;
const q = (name: string) => `\`${name.replaceAll('`', '``')}\``;

function done<T>(result: DriverResult<T>): T {
  assert.ok(result.done, 'the local driver answers at once');
  return result.value;
}
const call = (key: string) => ({ key, signal: AbortSignal.timeout(120_000) });

/** Every entry of a tree by lstat: a file's SHA-256 and mode, a link's target, a directory's mode. */
async function treeOf(dir: string) {
  const out: Record<string, string> = {};
  async function walk(rel: string) {
    for (const name of await fs.readdir(path.join(dir, rel))) {
      const p = path.join(rel, name);
      const stat = await fs.lstat(path.join(dir, p));
      if (stat.isSymbolicLink()) out[p] = `link ${await fs.readlink(path.join(dir, p))}`;
      else if (stat.isDirectory()) {
        out[p] = `dir ${(stat.mode & 0o7777).toString(8)}`;
        await walk(p);
      } else
        out[p] = `file ${(stat.mode & 0o7777).toString(8)} ${createHash('sha256')
          .update(await fs.readFile(path.join(dir, p)))
          .digest('hex')}`;
    }
  }
  await walk('');
  return out;
}

/** Every table: its definition, rows and triggers (without definer). */
async function dbOf(installId: string) {
  const db = slug(installId);
  const [tables] = await host.admin.query<mysql.RowDataPacket[]>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`,
    [db],
  );
  const out: Record<string, unknown> = {};
  for (const { name } of tables) {
    const [created] = await host.admin.query<mysql.RowDataPacket[]>(`SHOW CREATE TABLE ${q(db)}.${q(name)}`);
    const [rows] = await host.admin.query<mysql.RowDataPacket[]>(
      `SELECT * FROM ${q(db)}.${q(name)} ORDER BY 1`,
    );
    out[name] = { create: created[0]?.['Create Table'], rows: rows.map((r) => ({ ...r })) };
  }
  const [triggers] = await host.admin.query<mysql.RowDataPacket[]>(
    `SELECT trigger_name AS name, event_object_table AS tbl, action_timing AS timing,
            event_manipulation AS event, action_statement AS body
       FROM information_schema.triggers WHERE trigger_schema = ? ORDER BY trigger_name`,
    [db],
  );
  return { tables: out, triggers: triggers.map((x) => ({ ...x })) };
}

async function sql(installId: string, statements: string[]) {
  const conn = await host.asInstall(driver, installId);
  try {
    for (const statement of statements) await conn.query(statement);
  } finally {
    await conn.end();
  }
}

const ref = async (w: Json, id: string): Promise<InstallRef> => {
  const install = (await w.owner.client.get(`/v1/installs/${id}`)).body;
  return { id, name: install.name, wp_version: install.wp_version };
};

/** A source with files, a big table nobody changes, small tables and a trigger; its copy made as a move makes it. */
async function copied() {
  const w = await readyWorld(t, f);
  const target = await readyInstall(t, f, w, 'staging');
  const [from, to] = [await ref(w, w.install.id), await ref(w, target.id)];
  const src = host.paths(from.id).public;
  await writeSite(src, '6.5.2', 'source');
  await fs.mkdir(path.join(src, 'wp-content', 'uploads', 'big'), { recursive: true });
  for (let i = 0; i < 20; i++)
    await fs.writeFile(path.join(src, 'wp-content', 'uploads', 'big', `f${i}.bin`), randomBytes(100_000));
  await fs.mkdir(path.join(src, 'old dir', 'sub'), { recursive: true });
  await fs.writeFile(path.join(src, 'old dir', 'sub', 'x.txt'), 'x');
  await fs.writeFile(path.join(src, 'becomes-dir'), 'a file');
  await fs.mkdir(path.join(src, 'becomes-file'));
  await fs.writeFile(path.join(src, 'becomes-file', 'y'), 'y');
  await fs.writeFile(path.join(src, 'same-size.txt'), 'aaaa');
  await fs.symlink('index.php', path.join(src, 'link'));
  await sql(from.id, [
    'CREATE TABLE wp_big (id INT AUTO_INCREMENT PRIMARY KEY, body MEDIUMTEXT)',
    ...Array.from(
      { length: 10 },
      () => `INSERT INTO wp_big (body) VALUES ('${randomBytes(30_000).toString('base64')}')`,
    ),
    'CREATE TABLE wp_options (id INT PRIMARY KEY, v VARCHAR(100))',
    "INSERT INTO wp_options VALUES (1, 'before'), (2, 'kept')",
    'CREATE TABLE wp_gone (id INT PRIMARY KEY)',
    'CREATE TABLE wp_log (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(100))',
    'CREATE TABLE wp_meta (id INT PRIMARY KEY, k VARCHAR(20))',
    "INSERT INTO wp_meta VALUES (1, 'k')",
  ]);
  const op = randomUUID();
  const first = done(
    await driver.backup(call(`move:${op}:copy-backup`), { ...from, index_files: true } as InstallRef),
  );
  const restored = done(
    await driver.restore(call(`move:${op}:copy-restore`), {
      install: to,
      snapshot: first,
      restore_database: true,
      table_fingerprints: true,
    }),
  ) as RestoreResult;
  assert.ok(restored.table_fingerprints, 'the copy answers its tables fingerprints');
  assert.deepEqual(Object.keys(restored.table_fingerprints).sort(), [
    'wp_big',
    'wp_gone',
    'wp_log',
    'wp_meta',
    'wp_options',
  ]);
  return { w, from, to, op, first, tables: restored.table_fingerprints };
}

type Copied = Awaited<ReturnType<typeof copied>>;

async function finalSync(c: Copied) {
  const last = done(
    await driver.backup(call(`move:${c.op}:final-backup`), {
      ...c.from,
      changes_since: { location: c.first.location, tables: c.tables },
    } as InstallRef),
  );
  return last;
}

const manifestOf = async (snapshot: Snapshot) =>
  JSON.parse(
    await fs.readFile(path.join(host.root, 'backups', snapshot.location ?? '', 'manifest.json'), 'utf8'),
  );

describe('issue 30 (decision #235): a move final sync carries only the changes, and checks the whole copy', () => {
  it("issue 30: files added, changed (an mtime set back too), removed, retyped and relinked, a directory's mode alone changed, rows changed, tables added, dropped, altered and given a trigger: the final backup holds only those, and its restore makes the copy equal to the source", async () => {
    const c = await copied();
    const src = host.paths(c.from.id).public;
    // Files: one added in a new directory (a name with a newline and a leading dash), one changed
    // at the same size with its mtime set back (only its ctime tells), one removed, a tree removed,
    // a file become a directory and a directory a file, a link retargeted.
    await fs.mkdir(path.join(src, 'wp-content', 'uploads', '2026'), { recursive: true });
    await fs.writeFile(path.join(src, 'wp-content', 'uploads', '2026', '-new\nname.txt'), 'new');
    const before = await fs.stat(path.join(src, 'same-size.txt'));
    await fs.writeFile(path.join(src, 'same-size.txt'), 'bbbb');
    await fs.utimes(path.join(src, 'same-size.txt'), before.atime, before.mtime);
    await fs.rm(path.join(src, 'index.php'));
    await fs.rm(path.join(src, 'old dir'), { recursive: true });
    await fs.rm(path.join(src, 'becomes-dir'));
    await fs.mkdir(path.join(src, 'becomes-dir'));
    await fs.writeFile(path.join(src, 'becomes-dir', 'z'), 'z');
    await fs.rm(path.join(src, 'becomes-file'), { recursive: true });
    await fs.writeFile(path.join(src, 'becomes-file'), 'now a file');
    await fs.rm(path.join(src, 'link'));
    await fs.symlink('wp-includes/version.php', path.join(src, 'link'));
    // A directory whose mode alone changed (a plugin closing its folder).
    await fs.chmod(path.join(src, 'wp-includes'), 0o555);
    await sql(c.from.id, [
      "UPDATE wp_options SET v = 'after' WHERE id = 1",
      'CREATE TABLE wp_new (id INT PRIMARY KEY)',
      'INSERT INTO wp_new VALUES (7)',
      'DROP TABLE wp_gone',
      'ALTER TABLE wp_meta ADD INDEX by_k (k)',
      "CREATE TRIGGER wp_log_it AFTER UPDATE ON wp_options FOR EACH ROW INSERT INTO wp_log (msg) VALUES ('updated')",
    ]);

    const last = await finalSync(c);
    assert.deepEqual(last.incremental, { base: c.first.location });
    const manifest = await manifestOf(last);
    assert.deepEqual(manifest.delta.tables.changed, ['wp_meta', 'wp_new', 'wp_options']);
    assert.deepEqual(manifest.delta.tables.dropped, ['wp_gone']);
    assert.deepEqual(Object.keys(manifest.delta.tables.kept).sort(), ['wp_big', 'wp_log']);
    assert.deepEqual(manifest.delta.remove, ['becomes-dir', 'becomes-file', 'index.php', 'old dir']);
    // 2 MB of files and 400 KB of rows unchanged: a few KB cross.
    assert.ok(
      manifest.files.archive_bytes < 20_000,
      `the changes' archive: ${manifest.files.archive_bytes} bytes`,
    );
    assert.ok(
      manifest.database.dump_bytes < 20_000,
      `the changes' dump: ${manifest.database.dump_bytes} bytes`,
    );

    done(
      await driver.restore(call(`move:${c.op}:final-restore`), {
        install: c.to,
        snapshot: last,
        restore_database: true,
      }),
    );
    const [source, target] = [await treeOf(src), await treeOf(host.paths(c.to.id).public)];
    assert.deepEqual(target, source);
    assert.deepEqual(await dbOf(c.to.id), await dbOf(c.from.id));
    // The trigger moved with its table, and fires on the copy.
    await sql(c.to.id, ["UPDATE wp_options SET v = 'again' WHERE id = 2"]);
    const [log] = await host.admin.query<mysql.RowDataPacket[]>(`SELECT msg FROM ${q(slug(c.to.id))}.wp_log`);
    assert.deepEqual(
      log.map((r) => r.msg),
      ['updated'],
    );
  });

  it('issue 30: with nothing changed the final backup is empty and its restore passes its check; applied twice (a retry) it ends the same', async () => {
    const c = await copied();
    const last = await finalSync(c);
    const manifest = await manifestOf(last);
    assert.deepEqual(manifest.delta.tables.changed, []);
    assert.deepEqual(manifest.delta.remove, []);
    assert.equal(manifest.database.dump_bytes, 0);
    for (const attempt of ['final-restore', 'final-restore-again'])
      done(
        await driver.restore(call(`move:${c.op}:${attempt}`), {
          install: c.to,
          snapshot: last,
          restore_database: true,
        }),
      );
    assert.deepEqual(await treeOf(host.paths(c.to.id).public), await treeOf(host.paths(c.from.id).public));
    assert.deepEqual(await dbOf(c.to.id), await dbOf(c.from.id));
  });

  it('issue 30: a copy changed behind the move (a file and a table the source kept) fails the restore for good, naming both', async () => {
    const c = await copied();
    await fs.writeFile(path.join(host.paths(c.to.id).public, 'same-size.txt'), 'drift!');
    await sql(c.to.id, ["UPDATE wp_meta SET k = 'drift'"]);
    const last = await finalSync(c);
    await assert.rejects(
      driver.restore(call(`move:${c.op}:final-restore`), {
        install: c.to,
        snapshot: last,
        restore_database: true,
      }),
      (err: Error & { final?: boolean }) => {
        assert.match(err.message, /does not match the source/);
        assert.match(err.message, /"same-size.txt" holds 6 bytes, not 4/);
        assert.match(err.message, /table "wp_meta" changed here since the copy/);
        assert.equal(err.final, true);
        return true;
      },
    );
  });

  it('issue 30: a copy whose backup kept no index (an older agent) gets a whole final backup', async () => {
    const c = await copied();
    const last = done(
      await driver.backup(call(`move:${c.op}:final-backup`), {
        ...c.from,
        changes_since: { location: `${slug(c.from.id)}/${randomUUID()}`, tables: c.tables },
      } as InstallRef),
    );
    assert.equal(last.incremental, undefined);
    assert.ok((await manifestOf(last)).files.archive_bytes > 1_000_000);
  });
});
