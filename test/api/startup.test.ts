import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { type Database, openDatabase, queryRows } from '../../src/db/client.js';
import { cloneDatabase, TEST_DB } from '../support/databases.js';
import { runCli } from '../support/process.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-startup-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A fresh instance's environment (its own DATA_DIR; on PostgreSQL its own database). */
async function freshEnv() {
  const dataDir = fs.mkdtempSync(path.join(tmp, 'data-'));
  const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' };
  if (TEST_DB !== 'postgres') {
    const open = () => openDatabase({ kind: 'pglite', dir: path.join(dataDir, 'pg') });
    return { env, open, drop: async () => {} };
  }
  const clone = await cloneDatabase();
  await clone.database.close();
  env.DATABASE_URL = clone.url ?? '';
  const open = () => openDatabase({ kind: 'postgres', url: env.DATABASE_URL ?? '', poolSize: 1 });
  return { env, open, drop: clone.drop };
}

interface QueueRow {
  name: string;
  expire_seconds: number;
  updated_on: string;
}

/** pg-boss's queue table, read after the process that wrote it has exited (PGlite allows one). */
async function queues(open: () => Promise<Database>): Promise<Map<string, QueueRow>> {
  const database = await open();
  try {
    const rows = await queryRows<QueueRow>(
      database.db,
      sql`select name, expire_seconds, updated_on::text as updated_on from pgboss.queue`,
    );
    return new Map(rows.map((r) => [r.name, r]));
  } finally {
    await database.close();
  }
}

async function migrate(env: Record<string, string>) {
  const run = runCli(['migrate'], env);
  assert.equal(await run.exited, 0, run.output());
}

describe('issue 20 defect 8: a start does only what it must', () => {
  it('a reopen leaves queues that exist as wanted untouched; a changed JOB_* setting still updates them', async () => {
    const { env, open, drop } = await freshEnv();
    try {
      await migrate(env);
      const first = await queues(open);
      assert.ok(first.size > 0);
      await migrate(env);
      const second = await queues(open);
      // Every queue is as it was: not one was updated by the second start.
      assert.deepEqual([...second.entries()].sort(), [...first.entries()].sort());
      await migrate({ ...env, JOB_EXPIRE_SECONDS: '77' });
      const third = await queues(open);
      const updated = [...third.values()].filter((q) => q.updated_on !== first.get(q.name)?.updated_on);
      assert.ok(updated.length > 0);
      // Exactly the job queues (not their dead-letter queues) took the new expiry.
      for (const q of third.values()) {
        if (q.name.endsWith('-exhausted')) assert.equal(q.updated_on, first.get(q.name)?.updated_on, q.name);
        else assert.equal(q.expire_seconds, 77, q.name);
      }
    } finally {
      await drop();
    }
  });

  it("npm start's entry (bin/hostplane.js) runs the bundle, not the module tree, and serves: healthz, the demo credential it prints lists the demo account's sites", async () => {
    const { env, drop } = await freshEnv();
    const log = path.join(tmp, `bundle-modules-${process.pid}.log`);
    const server = runCli(
      ['serve'],
      { ...env, MODULE_LOG: log, NODE_OPTIONS: `--import ${path.resolve('test/support/module-log.mjs')}` },
      'bin/hostplane.js',
    );
    try {
      const [, base] = await server.waitFor(/Hostplane is serving (http:\/\/\S+)\/v1 /);
      const loaded = fs.readFileSync(log, 'utf8').split('\n');
      assert.ok(
        loaded.some((url) => url.endsWith('/dist/bundle/cli.js')),
        'the bundle was loaded',
      );
      assert.equal(
        loaded.filter((url) => /\/dist\/(main|cli|app)\.js$/.test(url)).length,
        0,
        'no module of the unbundled tree was loaded',
      );
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      const [, pair, accountId] = await server.waitFor(/curl -u '([^']+)' '\S+account_id=([0-9a-f-]+)'/);
      const res = await fetch(`${base}/v1/sites?account_id=${accountId}`, {
        headers: { authorization: `Basic ${Buffer.from(pair as string).toString('base64')}` },
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { results: unknown[] };
      assert.ok(Array.isArray(body.results));
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await drop();
    }
  });

  it("a start loads its own database's driver only, and no MariaDB client without the local driver", async () => {
    const { env, drop } = await freshEnv();
    const log = path.join(tmp, `modules-${process.pid}.log`);
    // The file-by-file tree (dist/cli.js), whose modules the log can tell apart: the bundle has the
    // same lazy imports as chunks of its own, without package names.
    const server = runCli(
      ['serve'],
      { ...env, MODULE_LOG: log, NODE_OPTIONS: `--import ${path.resolve('test/support/module-log.mjs')}` },
      'dist/cli.js',
    );
    try {
      await server.waitFor(/Hostplane is serving/);
      const loaded = fs.readFileSync(log, 'utf8').split('\n');
      const from = (pkg: string) => loaded.filter((url) => url.includes(`/node_modules/${pkg}/`));
      // The log works: the CLI and pg-boss went through it.
      assert.ok(loaded.some((url) => url.endsWith('/dist/main.js')));
      assert.ok(from('pg-boss').length > 0);
      assert.deepEqual(from('mysql2'), []);
      if (TEST_DB === 'postgres') {
        assert.deepEqual(from('@electric-sql/pglite'), []);
        assert.deepEqual(from('drizzle-orm/pglite'), []);
      } else {
        assert.ok(from('@electric-sql/pglite').length > 0);
        assert.deepEqual(from('drizzle-orm/node-postgres'), []);
      }
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await drop();
    }
  });
});
