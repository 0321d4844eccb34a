// test-db: pglite (the embedded database's own template: docs/decisions.md #112)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { openDatabase, queryRows } from '../../src/db/client.js';
import { MIGRATIONS_FOLDER, migrateDatabase } from '../../src/db/migrate.js';
import { copyTemplate, PGLITE_TEMPLATE_DIR } from '../../src/db/template.js';
import { TEST_DB } from '../support/databases.js';

// Issue 14: a fresh embedded data dir is a checked copy of the migrated template `npm run build`
// makes (dist/pglite-template; scripts/test.sh builds it); anything wrong with it means initdb.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-template-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const journal = JSON.parse(fs.readFileSync(path.join(MIGRATIONS_FOLDER, 'meta/_journal.json'), 'utf8')) as {
  entries: unknown[];
};

/** A copy of the build's template that a test may damage. */
function templateCopy(): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'template-'));
  fs.cpSync(PGLITE_TEMPLATE_DIR, dir, { recursive: true });
  return dir;
}

/** Migrations recorded and pg-boss queues made (0 without pg-boss's schema), before any migration runs. */
async function contents(dir: string) {
  const database = await openDatabase({ kind: 'pglite', dir });
  try {
    const [applied] = await queryRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from drizzle.__drizzle_migrations`,
    );
    const [boss] = await queryRows<{ installed: boolean }>(
      database.db,
      sql`select to_regclass('pgboss.queue') is not null as installed`,
    );
    if (!boss?.installed) return { migrations: applied?.n, queues: 0 };
    const [queues] = await queryRows<{ n: number }>(
      database.db,
      sql`select count(*)::int as n from pgboss.queue`,
    );
    return { migrations: applied?.n, queues: queues?.n };
  } finally {
    await database.close();
  }
}

describe('the embedded database template', { skip: TEST_DB !== 'pglite' && 'PGlite only' }, () => {
  it('holds every migration and the job queues, and a fresh data dir opened from it answers', async () => {
    const dir = path.join(tmp, 'fresh', 'data');
    const database = await openDatabase({ kind: 'pglite', dir, template: PGLITE_TEMPLATE_DIR });
    try {
      assert.deepEqual(database.created, { from: 'template' });
      const [row] = await queryRows<{ n: number }>(database.db, sql`select count(*)::int as n from accounts`);
      assert.equal(row?.n, 0);
    } finally {
      await database.close();
    }
    const state = await contents(dir);
    assert.equal(state.migrations, journal.entries.length);
    assert.ok((state.queues ?? 0) > 0, 'pg-boss queues are in the template');
    assert.deepEqual(
      fs.readdirSync(path.dirname(dir)).filter((f) => f.includes('.init-')),
      [],
      'no temporary folder is left',
    );
  });

  it('a template with a changed file is not used: initdb, then the migrations make the schema', async () => {
    const template = templateCopy();
    const control = path.join(template, 'data', 'global', 'pg_control');
    const bytes = fs.readFileSync(control);
    bytes[100] = (bytes[100] ?? 0) ^ 0xff;
    fs.writeFileSync(control, bytes);
    const dir = path.join(tmp, 'corrupt', 'data');
    const database = await openDatabase({ kind: 'pglite', dir, template });
    try {
      assert.equal(database.created?.from, 'initdb');
      assert.match(
        database.created?.from === 'initdb' ? database.created.reason : '',
        /global\/pg_control differs/,
      );
      await migrateDatabase(database);
      const [row] = await queryRows<{ n: number }>(database.db, sql`select count(*)::int as n from accounts`);
      assert.equal(row?.n, 0);
    } finally {
      await database.close();
    }
    assert.equal((await contents(dir)).migrations, journal.entries.length);
  });

  it('a missing file, an extra file, another PGlite release or no template at all means initdb', async () => {
    const missing = templateCopy();
    fs.rmSync(path.join(missing, 'data', 'PG_VERSION'));
    const extra = templateCopy();
    fs.writeFileSync(path.join(extra, 'data', 'base', 'stray'), 'x');
    const otherRelease = templateCopy();
    const manifestPath = path.join(otherRelease, 'manifest.json');
    const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8')) as { pglite: string };
    fs.writeFileSync(manifestPath, JSON.stringify({ ...manifest, pglite: '0.0.1' }));
    const cases = [
      [missing, /does not match its manifest/],
      [extra, /does not match its manifest/],
      [otherRelease, /written by PGlite 0\.0\.1/],
      [path.join(tmp, 'nowhere'), /no readable manifest/],
    ] as const;
    for (const [template, reason] of cases) {
      const target = path.join(tmp, `copy-${path.basename(template)}`);
      assert.match(copyTemplate(template, target) ?? 'used', reason);
      assert.equal(fs.existsSync(target), false, 'nothing is left behind');
    }
  });
});
