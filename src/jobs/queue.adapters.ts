import type { PGlite } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Database, Db } from '../db/client.js';

/** What pg-boss 10 runs its SQL through (its `db` option, per instance or per call). */
export type BossDb = { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };

/** pg-boss 10 over PGlite: multi-statement migrations and maintenance go through exec() (stack notes §2). */
function pgliteAdapter(pglite: PGlite): BossDb {
  return {
    async executeSql(text, values) {
      if (values?.length) return pglite.query(text, values);
      const results = await pglite.exec(text);
      return results.at(-1) ?? { rows: [] };
    },
  };
}

/** pg-boss 10 over our pool (no values: the simple protocol, so multi-statement text works). */
function poolAdapter(pool: pg.Pool): BossDb {
  return { executeSql: (text, values) => pool.query(text, values as unknown[]) };
}

/** pg-boss's own handle on the database: PGlite's, or the pool's. */
export function bossDbOf(database: Database): BossDb {
  if (database.pglite) return pgliteAdapter(database.pglite);
  if (database.pool) return poolAdapter(database.pool);
  throw new Error('createJobQueue: database has neither pglite nor pool');
}

/**
 * pg-boss 10 inside the caller's Drizzle transaction, so a job commits or rolls back with the row that
 * asked for it. On PGlite this is also what avoids a deadlock: the transaction holds PGlite's only
 * connection, and a send through pg-boss's own handle would wait for it forever. Drizzle drops
 * `undefined` params, so they become null; an array stays one parameter (`$2::uuid[]`), where
 * Drizzle would otherwise spread it into a list.
 */
function param(value: unknown): SQL {
  return Array.isArray(value) ? sql`${sql.param(value)}` : sql`${value ?? null}`;
}

export function transactionAdapter(tx: Db): BossDb {
  return {
    async executeSql(text, values = []) {
      const chunks: SQL[] = text
        .split(/\$(\d+)/)
        .map((part, i) => (i % 2 ? param(values[Number(part) - 1]) : sql.raw(part)));
      const result = (await tx.execute(sql.join(chunks))) as unknown as { rows: unknown[] } | unknown[];
      return { rows: Array.isArray(result) ? result : result.rows };
    },
  };
}
