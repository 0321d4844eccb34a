import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { openDatabase } from './client.js';

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
