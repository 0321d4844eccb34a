import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { cloneDatabase, TEST_DB, TEST_PG_URL } from '../support/databases.js';
import type { Json } from '../support/harness.js';
import { runCli } from '../support/process.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-cli-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The environment of a fresh instance: its own DATA_DIR, and on PostgreSQL its own database. */
async function freshEnv(): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  const dataDir = fs.mkdtempSync(path.join(tmp, 'data-'));
  if (TEST_DB !== 'postgres')
    return { env: { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' }, drop: async () => {} };
  const clone = await cloneDatabase();
  await clone.database.close();
  return {
    env: { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: clone.url ?? '' },
    drop: clone.drop,
  };
}

describe('hostplane serve (the README run command)', () => {
  it('first start prints demo credentials and a curl line that returns the demo sites in the envelope', async () => {
    const { env, drop } = await freshEnv();
    const server = runCli(['serve'], env);
    try {
      const [, username, password, url] = await server.waitFor(/curl -u '([^:]+):([^']+)' '([^']+)'/);
      const res = await fetch(url ?? '', {
        headers: { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` },
      });
      assert.equal(res.status, 200);
      const body: Json = await res.json();
      assert.deepEqual(Object.keys(body).sort(), ['count', 'next', 'previous', 'results']);
      assert.equal(body.count, 1);
      assert.equal(body.results[0].name, 'Demo Site');
      assert.match(server.output(), /Admin token \(shown once/);
      // Issue 14: a fresh embedded data dir is a copy of the build's migrated template, not an initdb.
      if (TEST_DB === 'pglite') assert.match(server.output(), /created from the build's migrated template/);
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
      // A second start on the same data keeps the demo and prints no secret again.
      const again = runCli(['serve'], env);
      await again.waitFor(/Hostplane is serving/);
      assert.doesNotMatch(again.output(), /Demo account created|Admin token/);
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0);
    } finally {
      server.child.kill('SIGKILL');
      await drop();
    }
  });

  if (TEST_DB === 'pglite') {
    it('a second process on the same embedded data dir is refused, not allowed to corrupt it', async () => {
      const { env } = await freshEnv();
      const first = runCli(['serve'], env);
      try {
        await first.waitFor(/Hostplane is serving/);
        const second = runCli(['serve'], env);
        assert.equal(await second.exited, 1);
        assert.match(second.output(), /in use by process \d+/);
      } finally {
        first.child.kill('SIGTERM');
        await first.exited;
      }
    });
  }
});

describe('configuration', () => {
  it('a bad configuration stops the start with one message listing every problem', async () => {
    const run = runCli(['serve'], {
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'mysql://x',
      DATA_DIR: path.join(tmp, 'never'),
    });
    assert.equal(await run.exited, 1);
    const out = run.output();
    assert.match(out, /Invalid configuration/);
    assert.match(out, /PORT must be an integer/);
    assert.match(out, /LOG_LEVEL must be one of/);
    assert.match(out, /DATABASE_URL must use postgres/);
  });
});

describe('hostplane seed', () => {
  it('loads a fixture file whose credentials then work', async () => {
    const { env, drop } = await freshEnv();
    const fixture = path.join(tmp, 'fixture.json');
    const accountId = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
    fs.writeFileSync(
      fixture,
      JSON.stringify({
        accounts: [{ id: accountId, name: 'Fixture Co' }],
        sites: [{ account_id: accountId, name: 'Fixture Site' }],
        users: [
          {
            email: 'fixture@example.test',
            first_name: 'F',
            last_name: 'X',
            memberships: [{ account_id: accountId, roles: 'owner' }],
            credentials: [{ username: 'fixture-owner', password: 'fixture-password-1' }],
          },
        ],
      }),
    );
    try {
      const seed = runCli(['seed', fixture], env);
      assert.equal(await seed.exited, 0, seed.output());
      assert.match(seed.output(), /"accounts":1,"sites":1,"installs":0,"users":1,"credentials":1/);
      const server = runCli(['serve'], env);
      try {
        const [, base] = await server.waitFor(/serving (http:\/\/[^\s]+)\/v1/);
        const res = await fetch(`${base}/v1/sites?account_id=${accountId}`, {
          headers: {
            authorization: `Basic ${Buffer.from('fixture-owner:fixture-password-1').toString('base64')}`,
          },
        });
        assert.equal(res.status, 200);
        assert.equal(((await res.json()) as Json).results[0].name, 'Fixture Site');
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
    } finally {
      await drop();
    }
  });

  it('refuses an invalid fixture and names the problem', async () => {
    const { env, drop } = await freshEnv();
    const fixture = path.join(tmp, 'bad.json');
    fs.writeFileSync(fixture, JSON.stringify({ installs: [{ name: 'BAD NAME', account_id: 'x' }] }));
    try {
      const seed = runCli(['seed', fixture], env);
      assert.equal(await seed.exited, 1);
      assert.match(seed.output(), /not a valid fixture/);
    } finally {
      await drop();
    }
  });
});

if (TEST_DB === 'postgres') {
  /** Runs `fn` on a new empty PostgreSQL database, dropped afterwards (with its connections). */
  async function withEmptyDatabase(prefix: string, fn: (url: string) => Promise<void>) {
    const name = `${prefix}_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: `${TEST_PG_URL}/postgres` });
    await admin.connect();
    await admin.query(`create database ${name}`);
    try {
      await fn(`${TEST_PG_URL}/${name}`);
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  }

  describe('migrations on PostgreSQL', () => {
    it('three processes migrating one empty database at once apply each migration exactly once', async () => {
      await withEmptyDatabase('hp_migrate', async (url) => {
        const runs = [1, 2, 3].map(() =>
          runCli(['migrate'], { DATABASE_URL: url, DATA_DIR: path.join(tmp, 'm') }),
        );
        const codes = await Promise.all(runs.map((r) => r.exited));
        assert.deepEqual(codes, [0, 0, 0], runs.map((r) => r.output()).join('\n'));
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        const journal = await client.query('select count(*)::int as n from drizzle.__drizzle_migrations');
        const files = fs.readdirSync('drizzle').filter((f) => f.endsWith('.sql'));
        assert.equal(journal.rows[0].n, files.length);
        await client.end();
      });
    });

    it('three API processes starting at once on one empty database all serve, and make one demo account', async () => {
      await withEmptyDatabase('hp_demo', async (url) => {
        const runs = [1, 2, 3].map((i) =>
          runCli(['api'], {
            DATABASE_URL: url,
            DATA_DIR: path.join(tmp, `d${i}`),
            PORT: '0',
            HOST: '127.0.0.1',
          }),
        );
        try {
          await Promise.all(
            runs.map((r) => r.waitFor(/Hostplane is serving \S+\/v1 on PostgreSQL/, 120_000)),
          );
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          const accounts = await client.query('select count(*)::int as n from accounts');
          const installs = await client.query(
            "select count(*)::int as n from installs where name = 'demosite'",
          );
          await client.end();
          assert.deepEqual([accounts.rows[0].n, installs.rows[0].n], [1, 1]);
        } finally {
          for (const r of runs) r.child.kill('SIGKILL');
          await Promise.all(runs.map((r) => r.exited));
        }
      });
    });
  });
}
