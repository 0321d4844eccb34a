import { fileURLToPath } from 'node:url';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import type { Database } from './client.js';

/** The numbered SQL migrations (drizzle/NNNN_name.sql), resolved the same from src/ and dist/. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Arbitrary constant key of the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK_KEY = 727_274_001;

/**
 * Applies pending migrations. On PostgreSQL this holds a session advisory lock on a dedicated
 * connection, so several processes starting together apply each migration exactly once.
 */
export async function migrateDatabase(database: Database): Promise<void> {
  if (database.pglite) {
    await migratePglite(drizzlePglite(database.pglite), { migrationsFolder: MIGRATIONS_FOLDER });
    return;
  }
  if (!database.pool) throw new Error('migrateDatabase: database has neither pool nor pglite');
  const client = await database.pool.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await migratePg(drizzlePg(client), { migrationsFolder: MIGRATIONS_FOLDER });
    } finally {
      await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.release();
  }
}
