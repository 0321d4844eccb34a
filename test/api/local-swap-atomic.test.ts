// test-db: postgres (the subject is the local driver's files and MariaDB, not the control plane's database)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type mysql from 'mysql2/promise';
import { createManualClock } from '../../src/clock.js';
import type { HostingDriver, InstallRef, Snapshot } from '../../src/drivers/driver.js';
import { createMariaDb } from '../../src/drivers/local/database.js';
import { createLocalDriver, type LocalDriverDeps } from '../../src/drivers/local/driver.js';
import { systemUser } from '../../src/drivers/local/names.js';
import { searchReplace } from '../../src/drivers/local/search-replace.js';
import { ensureUser, removeUser } from '../../src/drivers/local/wordpress.js';
import { createSecretBox } from '../../src/secrets.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json, SECRET_KEY } from '../support/harness.js';
import { operationOf, readyInstall, readyWorld } from '../support/jobs.js';
import {
  checksums,
  type LocalDriverProbe,
  localHosting,
  MARIADB_URL,
  slug,
  writeSite,
} from '../support/local-hosting.js';

// Issue 28 finding 7: a restore or copy is all or nothing. The installs hold tables with triggers and
// names MariaDB allows but the driver once refused (a space, a backtick, a dot, unicode); faults are
// injected between the database swap and the document-root swap by a second driver over the same
// HOSTING_ROOT and MariaDB (as another worker would be), failing there or hanging there for ever (a
// worker that died half-way: nothing of it runs again).
const host = await localHosting();
const t = await buildTestApp({ env: { ...host.env } });
const f = factories(t);
const driver = t.app.services.driver as unknown as LocalDriverProbe;

const ODD = { space: 'wp_odd table', tick: 'wp_back`tick.ünï' } as const;
const q = (name: string) => `\`${name.replaceAll('`', '``')}\``;

/** A second local driver over the same database, HOSTING_ROOT and MariaDB, with a fault between the swaps. */
function driverWith(betweenSwaps: NonNullable<LocalDriverDeps['betweenSwaps']>): HostingDriver {
  const mariadb = createMariaDb(MARIADB_URL);
  after(() => mariadb.close());
  return createLocalDriver({
    db: t.database.db,
    clock: createManualClock(new Date()),
    secretBox: createSecretBox(SECRET_KEY),
    mariadb,
    hostingRoot: host.root,
    maxHeavy: 4,
    acme: { directoryUrl: 'https://acme.invalid/directory', email: null, caBundleFile: null },
    betweenSwaps,
  });
}

/** Tables (odd names), rows, a trigger writing to another table, as the install's own MariaDB user. */
async function seed(installId: string, marker: string) {
  const conn = await host.asInstall(driver, installId);
  try {
    await conn.query('CREATE TABLE wp_posts (id INT PRIMARY KEY, title VARCHAR(200))');
    await conn.query(`CREATE TABLE ${q(ODD.space)} (id INT PRIMARY KEY, v VARCHAR(200))`);
    await conn.query(`CREATE TABLE ${q(ODD.tick)} (id INT PRIMARY KEY, v VARCHAR(200))`);
    await conn.query('CREATE TABLE wp_log (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(200))');
    await conn.query(
      `CREATE TRIGGER \`wp_log odd\` AFTER INSERT ON ${q(ODD.space)} FOR EACH ROW INSERT INTO wp_log (msg) VALUES (CONCAT('odd ', NEW.v))`,
    );
    await conn.query(
      `CREATE TRIGGER \`wp_tick\`\`s\` BEFORE UPDATE ON ${q(ODD.tick)} FOR EACH ROW SET NEW.v = CONCAT(NEW.v, '!')`,
    );
    await conn.query('INSERT INTO wp_posts VALUES (1, ?)', [`${marker} post`]);
    await conn.query(`INSERT INTO ${q(ODD.space)} (id, v) VALUES (1, ?), (2, ?)`, [marker, `${marker} 2`]);
    await conn.query(`INSERT INTO ${q(ODD.tick)} (id, v) VALUES (1, ?)`, [marker]);
  } finally {
    await conn.end();
  }
}

/** Every table of the install's database (rows, or VIEW) and its triggers, read as root. */
async function dbState(installId: string) {
  const db = slug(installId);
  const [tables] = await host.admin.query<mysql.RowDataPacket[]>(
    `SELECT table_name AS name, table_type AS type FROM information_schema.tables
      WHERE table_schema = ? ORDER BY table_name`,
    [db],
  );
  const rows: Record<string, unknown> = {};
  for (const { name, type } of tables) {
    if (type === 'VIEW') rows[name] = 'VIEW';
    else {
      const [r] = await host.admin.query<mysql.RowDataPacket[]>(
        `SELECT * FROM ${q(db)}.${q(name)} ORDER BY 1`,
      );
      rows[name] = r.map((x) => ({ ...x }));
    }
  }
  const [triggers] = await host.admin.query<mysql.RowDataPacket[]>(
    `SELECT trigger_name AS name, event_object_table AS tbl, action_timing AS timing,
            event_manipulation AS event, action_statement AS body, definer
       FROM information_schema.triggers WHERE trigger_schema = ? ORDER BY trigger_name`,
    [db],
  );
  return { tables: rows, triggers: triggers.map((x) => ({ ...x })) };
}

const state = async (installId: string) => ({
  files: await checksums(host.paths(installId).public),
  ...(await dbState(installId)),
});

/** What a swap of the install may leave: staging entries, scratch databases, a rewrite account, `.old` trees. */
async function leftovers(installId: string) {
  const s = slug(installId);
  const hex = s.slice('hp_'.length);
  const [dbs] = await host.admin.query<mysql.RowDataPacket[]>(
    'SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name IN (?, ?)',
    [`hps_${hex}`, `hpt_${hex}`],
  );
  const [users] = await host.admin.query<mysql.RowDataPacket[]>(
    'SELECT user FROM mysql.user WHERE user = ?',
    [`hpr_${hex}`],
  );
  const staging = await fs.readdir(path.join(host.root, 'staging')).catch(() => [] as string[]);
  const dir = await fs.readdir(host.paths(installId).dir);
  return {
    databases: dbs.map((r) => String(r.name)),
    users: users.map((r) => String(r.user)),
    staging: staging.filter((n) => n.startsWith(s)),
    old: dir.filter((n) => n.endsWith('.old')),
  };
}
const NOTHING = { databases: [], users: [], staging: [], old: [] };

/** The install's triggers fire in its live database when its own user writes. */
async function triggersFire(installId: string, marker: string) {
  const conn = await host.asInstall(driver, installId);
  try {
    await conn.query(`INSERT INTO ${q(ODD.space)} (id, v) VALUES (99, ?)`, [marker]);
    await conn.query(`UPDATE ${q(ODD.tick)} SET v = ? WHERE id = 1`, [marker]);
    const [log] = await conn.query<mysql.RowDataPacket[]>('SELECT msg FROM wp_log ORDER BY id DESC LIMIT 1');
    const [tick] = await conn.query<mysql.RowDataPacket[]>(`SELECT v FROM ${q(ODD.tick)} WHERE id = 1`);
    return { log: log[0]?.msg, tick: tick[0]?.v };
  } finally {
    await conn.end();
  }
}

async function backupOf(w: Json) {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'restore point',
    notification_emails: [],
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await t.runJobs();
  const backup = await w.owner.client.get(`/v1/installs/${w.install.id}/backups/${res.body.id}`);
  assert.equal(backup.body.status, 'completed', JSON.stringify(backup.body));
  return backup.body;
}

/** An install with files, odd tables and triggers, a backup of it, then changed: [backup, its state, the changed state]. */
async function backedUpThenChanged(w: Json) {
  const p = host.paths(w.install.id);
  await writeSite(p.public, '6.5.2', 'original');
  await seed(w.install.id, 'original');
  const backup = await backupOf(w);
  const restorePoint = await state(w.install.id);
  await writeSite(p.public, '6.6.0', 'changed');
  await fs.writeFile(path.join(p.public, 'added later.txt'), 'after the backup');
  const conn = await host.asInstall(driver, w.install.id);
  await conn.query(`UPDATE ${q(ODD.space)} SET v = 'changed'`);
  await conn.query('DROP TRIGGER `wp_log odd`');
  await conn.query(
    `CREATE TRIGGER \`wp_log changed\` AFTER DELETE ON ${q(ODD.space)} FOR EACH ROW INSERT INTO wp_log (msg) VALUES ('gone')`,
  );
  await conn.query('CREATE TABLE `wp_new table` (id INT PRIMARY KEY)');
  await conn.end();
  return { backup, restorePoint, changed: await state(w.install.id) };
}

const ref = async (w: Json, id: string): Promise<InstallRef> => {
  const install = (await w.owner.client.get(`/v1/installs/${id}`)).body;
  return { id, name: install.name, wp_version: install.wp_version };
};

/** The snapshot the driver made for a backup (what a restore job hands it). */
async function snapshotOf(backupId: string): Promise<Snapshot> {
  const { backups } = await import('../../src/db/schema.js');
  const { eq } = await import('drizzle-orm');
  const [row] = await t.database.db.select().from(backups).where(eq(backups.id, backupId));
  assert.ok(row?.snapshot, `backup ${backupId} has a snapshot`);
  return row.snapshot as Snapshot;
}

describe('issue 28 finding 7: restores and copies are all or nothing', () => {
  it('issue 28 finding 7: a restore of a site with triggers and odd table names (space, backtick, dot, unicode) brings back its exact files, rows and triggers, leaving nothing behind', async () => {
    const w = await readyWorld(t, f);
    const { backup, restorePoint } = await backedUpThenChanged(w);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    assert.equal(res.status, 202);
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    assert.deepEqual(await state(w.install.id), restorePoint);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
    assert.deepEqual(await triggersFire(w.install.id, 'live'), { log: 'odd live', tick: 'live!' });
  });

  it('issue 28 finding 7: a copy of a site with triggers and odd table names makes the destination equal to the source, its triggers defined by the destination, leaving nothing behind', async () => {
    const w = await readyWorld(t, f);
    const destination = await readyInstall(t, f, w, 'staging');
    await writeSite(host.paths(w.install.id).public, '6.4.0', 'source');
    await writeSite(host.paths(destination.id).public, '6.3.0', 'destination');
    await seed(w.install.id, 'source');
    await seed(destination.id, 'destination');
    const source = await state(w.install.id);
    const res = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: w.install.id,
      destination_environment_id: destination.id,
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', JSON.stringify(op));
    const copied = await state(destination.id);
    assert.deepEqual(copied.files, source.files);
    assert.deepEqual(copied.tables, source.tables);
    // The same triggers, defined by the destination's own user (the source's has no right there).
    assert.deepEqual(
      copied.triggers,
      source.triggers.map((tr) => ({ ...tr, definer: `${slug(destination.id)}@%` })),
    );
    assert.deepEqual(await leftovers(destination.id), NOTHING);
    assert.deepEqual(await triggersFire(destination.id, 'copied'), { log: 'odd copied', tick: 'copied!' });
    // The source is as it was.
    assert.deepEqual(await state(w.install.id), source);
  });

  it('issue 28 finding 7: a copy of some tables whose trigger name the destination uses on a table it keeps is refused before any swap, with the reason, and the destination is left as it was', async () => {
    const w = await readyWorld(t, f);
    const destination = await readyInstall(t, f, w, 'staging');
    await writeSite(host.paths(w.install.id).public, '6.4.0', 'source');
    await writeSite(host.paths(destination.id).public, '6.3.0', 'destination');
    const define = async (installId: string, triggerTable: string) => {
      const conn = await host.asInstall(driver, installId);
      await conn.query('CREATE TABLE wp_posts (id INT PRIMARY KEY, title VARCHAR(200))');
      await conn.query('CREATE TABLE wp_log (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(200))');
      await conn.query(
        `CREATE TRIGGER \`wp clash\` BEFORE INSERT ON ${triggerTable} FOR EACH ROW SET @hp = 1`,
      );
      await conn.query('INSERT INTO wp_posts VALUES (1, ?)', [installId]);
      await conn.end();
    };
    // The source's trigger is on wp_posts (copied); the destination's of the same name on wp_log (kept).
    await define(w.install.id, 'wp_posts');
    await define(destination.id, 'wp_log');
    const before = await state(destination.id);
    const res = await w.owner.client.post('/v1/install_copy', {
      source_environment_id: w.install.id,
      destination_environment_id: destination.id,
      custom_options: { db_tables: ['wp_posts'] },
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed', JSON.stringify(op));
    assert.match(String(op.error), /wp clash/);
    assert.deepEqual(await state(destination.id), before);
    assert.deepEqual(await leftovers(destination.id), NOTHING);
  });

  it('issue 28 finding 7: a restore and a copy that fail between the database swap and the files swap leave the destination exactly as it was, with nothing behind; a retry then completes', async () => {
    const w = await readyWorld(t, f);
    const destination = await readyInstall(t, f, w, 'staging');
    const { backup, restorePoint, changed } = await backedUpThenChanged(w);
    await writeSite(host.paths(destination.id).public, '6.3.0', 'destination');
    await seed(destination.id, 'destination');
    const before = await state(destination.id);
    const failing = driverWith(async (operation) => {
      throw new Error(`injected ${operation} fault between the swaps`);
    });
    const signal = AbortSignal.timeout(120_000);
    const snapshot = await snapshotOf(backup.id);
    const install = await ref(w, w.install.id);
    await assert.rejects(
      failing.restore({ key: randomUUID(), signal }, { install, snapshot, restore_database: true }),
      /injected restore fault between the swaps/,
    );
    assert.deepEqual(await state(w.install.id), changed);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
    const copy = {
      source: install,
      destination: await ref(w, destination.id),
      include_files: true,
      include_db: true,
      db_tables: null,
    };
    await assert.rejects(failing.copy({ key: randomUUID(), signal }, copy), /injected copy fault/);
    assert.deepEqual(await state(destination.id), before);
    assert.deepEqual(await leftovers(destination.id), NOTHING);

    // The job's retry (the app's driver, no fault) completes both.
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    assert.deepEqual(await state(w.install.id), restorePoint);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
  });

  it('issue 28 finding 7: a worker that dies between the database swap and the files swap: the next call on the install puts it back as it was, nothing left behind, and a restore then completes', async () => {
    const w = await readyWorld(t, f);
    const { backup, restorePoint, changed } = await backedUpThenChanged(w);
    let reached: () => void = () => undefined;
    const halfway = new Promise<void>((resolve) => {
      reached = resolve;
    });
    // Never answers, nor looks at its signal: what follows the fault point never runs (a dead worker).
    const dying = driverWith(async () => {
      reached();
      await new Promise<never>(() => undefined);
    });
    const install = await ref(w, w.install.id);
    const call = dying.restore(
      { key: randomUUID(), signal: new AbortController().signal },
      { install, snapshot: await snapshotOf(backup.id), restore_database: true },
    );
    // The call ends only if it never reached the fault point (then the test fails, it does not hang).
    await Promise.race([
      halfway,
      call.then(
        () => assert.fail('the restore finished without reaching the point between its swaps'),
        (err: Error) => assert.fail(`the restore failed before the point between its swaps: ${err.message}`),
      ),
    ]);
    // Half-way: the tables are the backup's, the files still the changed ones.
    assert.deepEqual((await dbState(w.install.id)).tables, restorePoint.tables);
    assert.deepEqual(await checksums(host.paths(w.install.id).public), changed.files);

    // The next call on the install (a backup, through the API) finds the half-done swap and undoes it.
    const second = await backupOf(w);
    assert.deepEqual(await state(w.install.id), changed);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
    assert.equal(second.status, 'completed');

    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    assert.equal((await operationOf(w.owner.client, res)).status, 'completed');
    assert.deepEqual(await state(w.install.id), restorePoint);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
  });

  it('issue 28 finding 7: a backup whose trigger was made with its database name is refused before anything is loaded (the load would define it in the live database), and the install is left as it was', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'qualified');
    await seed(w.install.id, 'qualified');
    const conn = await host.asInstall(driver, w.install.id);
    await conn.query(
      `CREATE TRIGGER ${q(slug(w.install.id))}.\`wp qualified\` BEFORE INSERT ON ${q(slug(w.install.id))}.wp_posts FOR EACH ROW SET NEW.title = UPPER(NEW.title)`,
    );
    const backup = await backupOf(w);
    await conn.query('DROP TRIGGER `wp qualified`');
    await conn.end();
    await writeSite(p.public, '6.6.0', 'changed');
    const changed = await state(w.install.id);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed', JSON.stringify(op));
    assert.match(String(op.error), /wp qualified/);
    assert.deepEqual(await state(w.install.id), changed);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
  });

  it('issue 28 finding 7: a backup holding a view is refused before any swap, with the reason, and the install is left as it was', async () => {
    const w = await readyWorld(t, f);
    const p = host.paths(w.install.id);
    await writeSite(p.public, '6.5.2', 'with a view');
    await seed(w.install.id, 'viewed');
    const conn = await host.asInstall(driver, w.install.id);
    await conn.query(`CREATE VIEW \`wp_odd view\` AS SELECT id, v FROM ${q(ODD.space)}`);
    await conn.end();
    const backup = await backupOf(w);
    await writeSite(p.public, '6.6.0', 'changed');
    const changed = await state(w.install.id);
    const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups/${backup.id}/restore`, {
      notification_emails: [],
      create_checkpoint: false,
    });
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'failed', JSON.stringify(op));
    assert.match(String(op.error), /view/i);
    assert.deepEqual(await state(w.install.id), changed);
    assert.deepEqual(await leftovers(w.install.id), NOTHING);
  });
});

describe('issue 28 finding 10: the copy URL rewrite runs as the destination install, not as root with the administrator password', () => {
  it("issue 28 finding 10: search-replace runs as the install's system user with a MariaDB account of its staging database only, dropped after", async () => {
    const w = await readyWorld(t, f);
    const id = w.install.id;
    const user = systemUser(id);
    await ensureUser(user, AbortSignal.timeout(10_000));
    after(() => removeUser(user, AbortSignal.timeout(10_000)));
    const staging = `hps_${slug(id).slice(3)}`;
    await host.admin.query(`CREATE DATABASE ${q(staging)}`);
    after(() => host.admin.query(`DROP DATABASE IF EXISTS ${q(staging)}`));
    await host.admin.query(
      `CREATE TABLE ${q(staging)}.wp_options (option_name VARCHAR(64) PRIMARY KEY, option_value TEXT, who VARCHAR(200))`,
    );
    // Who ran the UPDATE: USER() in a trigger is the session's account (the trigger is the test's).
    await host.admin.query(
      `CREATE TRIGGER ${q(staging)}.who BEFORE UPDATE ON ${q(staging)}.wp_options FOR EACH ROW SET NEW.who = USER()`,
    );
    await host.admin.query(
      `INSERT INTO ${q(staging)}.wp_options (option_name, option_value) VALUES ('home', ?)`,
      ['http://source.example'],
    );
    const mariadb = createMariaDb(MARIADB_URL);
    after(() => mariadb.close());
    const result = await searchReplace({
      mariadb,
      installId: id,
      prefix: 'wp_',
      pairs: [['http://source.example', 'http://destination.example']],
      scriptPath: path.join(host.root, 'web', 'search-replace.php'),
      signal: AbortSignal.timeout(30_000),
    });
    const [rows] = await host.admin.query<mysql.RowDataPacket[]>(
      `SELECT option_value AS value, who FROM ${q(staging)}.wp_options`,
    );
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.value, 'http://destination.example');
    assert.match(String(rows[0]?.who), new RegExp(`^hpr_${slug(id).slice(3)}@`));
    // The script's own report: its effective uid is the install's user's.
    assert.deepEqual(result, {
      rows: 1,
      uid: Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim()),
    });
    assert.deepEqual((await leftovers(id)).users, []);
  });
});
