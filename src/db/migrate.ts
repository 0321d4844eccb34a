import { fileURLToPath } from 'node:url';
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
  // Each driver's migrator loads only with a database of its kind (issue 20, as in db/client.ts).
  if (database.pglite) {
    const [{ drizzle: drizzlePglite }, { migrate: migratePglite }] = await Promise.all([
      import('drizzle-orm/pglite'),
      import('drizzle-orm/pglite/migrator'),
    ]);
    await migratePglite(drizzlePglite(database.pglite), { migrationsFolder: MIGRATIONS_FOLDER });
    return;
  }
  if (!database.pool) throw new Error('migrateDatabase: database has neither pool nor pglite');
  const [{ drizzle: drizzlePg }, { migrate: migratePg }] = await Promise.all([
    import('drizzle-orm/node-postgres'),
    import('drizzle-orm/node-postgres/migrator'),
  ]);
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
