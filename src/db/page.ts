import type { SQL } from 'drizzle-orm';
import type { PgColumn, PgSelect } from 'drizzle-orm/pg-core';

/** A page of a list (G5): what repositories take; http/pagination.ts parses it from the query. */
export interface Page {
  limit: number;
  offset: number;
}

/**
 * One page of a list, and how many rows the list has in all (the envelope's `count`). `query` is the
 * list's select made `$dynamic()`: its projection, joins and filter, no order or limit. `total` counts
 * the same rows, usually `db.$count(table, where)` on the list's own table (a left join that names a
 * related row adds none, so the count leaves it out). It runs first, then the page: one statement at
 * a time, as a transaction on PGlite needs. The order must end in a unique column so that pages never
 * overlap.
 */
export async function selectPage<Q extends PgSelect>(
  query: Q,
  total: PromiseLike<number>,
  order: (PgColumn | SQL)[],
  page: Page,
): Promise<{ count: number; rows: Awaited<Q> }> {
  const count = Number(await total);
  const rows = await query
    .orderBy(...order)
    .limit(page.limit)
    .offset(page.offset);
  return { count, rows: rows as Awaited<Q> };
}
