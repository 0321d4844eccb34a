import { asc, eq, inArray } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { accounts } from '../../db/schema.js';

const projection = {
  id: accounts.id,
  name: accounts.name,
  sites_enabled: accounts.sites_enabled,
  preferred_data_center: accounts.preferred_data_center,
  plan: accounts.plan,
  created_at: accounts.created_at,
};
export type AccountRow = RowOf<typeof projection>;

export function findAccount(db: Db, id: string): Promise<AccountRow | null> {
  return db
    .select(projection)
    .from(accounts)
    .where(eq(accounts.id, id))
    .then((rows) => rows[0] ?? null);
}

export async function listAccounts(db: Db, ids: string[], page: Page) {
  if (ids.length === 0) return { count: 0, rows: [] as AccountRow[] };
  const where = inArray(accounts.id, ids);
  return selectPage(
    db.select(projection).from(accounts).where(where).$dynamic(),
    db.$count(accounts, where),
    [asc(accounts.name), asc(accounts.id)],
    page,
  );
}

export async function insertAccount(db: Db, values: typeof accounts.$inferInsert): Promise<AccountRow> {
  const [row] = await db.insert(accounts).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}
