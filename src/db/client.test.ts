import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { PGlite, Transaction } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { openDatabase, queryRows } from './client.js';

// Issue 14: PGlite's write count (Database.writes) lets the read cache skip its freshness lookup
// while nothing was written. It must move for anything that may write, and only once it has ended.
describe('PGlite write count', async () => {
  const database = await openDatabase({ kind: 'pglite-memory' });
  after(() => database.close());
  const pglite = database.pglite;
  const writes = database.writes;
  assert.ok(pglite && writes);
  await pglite.exec('create table t (n int)');

  it('a plain SELECT does not move it, outside a transaction', async () => {
    const before = writes.count;
    await pglite.query('select 1');
    await pglite.query('  SELECT count(*) from t where n = $1', [1]);
    assert.equal(writes.count, before);
  });

  it('moves once a write has ended: INSERT, WITH ... UPDATE, exec, a transaction, a failed statement', async () => {
    const cases: [string, () => Promise<unknown>][] = [
      ['insert', () => pglite.query('insert into t values ($1)', [1])],
      ['with update', () => pglite.query('with x as (select 1) update t set n = n + 1')],
      ['exec', () => pglite.exec('select 1; insert into t values (2)')],
      ['transaction', () => pglite.transaction((tx) => tx.query('insert into t values (3)'))],
      ['failed', () => pglite.query('insert into missing values (1)').catch(() => {})],
      [
        'rolled back',
        () =>
          pglite
            .transaction(async (tx) => {
              await tx.query('select 1');
              throw new Error('abort');
            })
            .catch(() => {}),
      ],
      ['drizzle', () => database.db.transaction(async (tx) => tx.execute('delete from t where n = 3'))],
    ];
    for (const [label, write] of cases) {
      const before: number = writes.count;
      const pending = write();
      assert.equal(writes.count, before, `${label}: not before it ends`);
      await pending;
      assert.ok(writes.count > before, `${label}: moved once ended`);
    }
  });
});

// Issue 29 defect 6 (docs/decisions.md #236): Drizzle's identity parsers (dates, times and intervals
// read as PostgreSQL's text) are the instance's, so its statements, in and out of transactions, hand
// PGlite none: PGlite merged them into its ~400 type parsers for every statement.
describe('PGlite statements from Drizzle carry no per-statement parsers', async () => {
  const database = await openDatabase({ kind: 'pglite-memory' });
  after(() => database.close());
  const pglite = database.pglite;
  assert.ok(pglite);
  const given: unknown[] = [];
  type Query = PGlite['query'];
  const spy =
    (query: Query): Query =>
    (...args: Parameters<Query>) => {
      given.push(args[2]?.parsers);
      return query(...args);
    };
  pglite.query = spy(pglite.query.bind(pglite));
  const transaction = pglite.transaction.bind(pglite);
  pglite.transaction = ((fn: (tx: Transaction) => Promise<unknown>) =>
    transaction((tx) => {
      tx.query = spy(tx.query.bind(tx));
      return fn(tx);
    })) as PGlite['transaction'];
  const TIMES = sql`select timestamptz '2026-01-02 03:04:05.123456+00' as at, interval '90 minutes' as span,
    date '2026-01-02' as day, array[timestamp '2026-01-02 03:04:05'] as ats`;

  it('reads dates, times and intervals as text, as Drizzle asks, outside and inside a transaction', async () => {
    const expected = {
      at: '2026-01-02 03:04:05.123456+00',
      span: '01:30:00',
      day: '2026-01-02',
      ats: '{"2026-01-02 03:04:05"}',
    };
    assert.deepEqual(await queryRows(database.db, TIMES), [expected]);
    const inside = await database.db.transaction((tx) => queryRows(tx, TIMES));
    assert.deepEqual(inside, [expected]);
    // Other types keep PGlite's parsers (a Drizzle statement passes none of its own).
    const others = await queryRows(database.db, sql`select 2::int as n, array[1, 2] as ns, true as ok`);
    assert.deepEqual(others[0], { n: 2, ns: [1, 2], ok: true });
  });

  it('no statement of Drizzle passed parsers to PGlite', () => {
    assert.ok(given.length >= 3);
    assert.deepEqual(
      given.filter((p) => p !== undefined),
      [],
    );
  });
});
