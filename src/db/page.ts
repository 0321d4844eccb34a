import { count, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable, SelectedFields } from 'drizzle-orm/pg-core';
import type { Db, RowOf } from './client.js';

/** A page of a list (G5): what repositories take; http/pagination.ts parses it from the query. */
export interface Page {
  limit: number;
  offset: number;
}

/**
 * One page of `table`'s rows matching `where`, and how many match in all (the envelope's `count`).
 * The order must end in a unique column so that pages never overlap.
 */
export async function selectPage<F extends SelectedFields>(
  db: Db,
  table: PgTable,
  fields: F,
  where: SQL | undefined,
  order: (PgColumn | SQL)[],
  page: Page,
): Promise<{ count: number; rows: RowOf<F>[] }> {
  const [total] = await db.select({ n: count() }).from(table).where(where);
  const rows = await db
    .select(fields)
    .from(table)
    .where(where)
    .$dynamic()
    .orderBy(...order)
    .limit(page.limit)
    .offset(page.offset);
  // The rows are the projection's fields; with `table` generic, Drizzle cannot say so itself.
  return { count: Number(total?.n ?? 0), rows: rows as RowOf<F>[] };
}
