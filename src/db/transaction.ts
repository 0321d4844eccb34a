import type { Db } from './client.js';

/**
 * The only place a transaction is opened. Inside `fn`, every query must use `tx`: on PGlite a query
 * on the outer handle waits for the transaction to end, which never happens (a hang, not an error).
 */
export function withTransaction<T>(db: Db, fn: (tx: Db) => Promise<T>): Promise<T> {
  return db.transaction((tx) => fn(tx as unknown as Db));
}
