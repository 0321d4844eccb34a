import { and, asc, eq, inArray } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { apiCredentials, installs } from '../../db/schema.js';

// Never the secret's hash: it is not part of any answer.
const projection = {
  id: apiCredentials.id,
  account_id: apiCredentials.account_id,
  user_id: apiCredentials.user_id,
  description: apiCredentials.description,
  scope: apiCredentials.scope,
  install_ids: apiCredentials.install_ids,
  allowed_cidrs: apiCredentials.allowed_cidrs,
  expires_at: apiCredentials.expires_at,
  revoked_at: apiCredentials.revoked_at,
  last_used_at: apiCredentials.last_used_at,
  last_used_ip: apiCredentials.last_used_ip,
  created_at: apiCredentials.created_at,
};
export type CredentialRow = RowOf<typeof projection>;

export async function insertCredential(
  db: Db,
  values: typeof apiCredentials.$inferInsert,
): Promise<CredentialRow> {
  const [row] = await db.insert(apiCredentials).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export function listCredentials(db: Db, accountId: string, page: Page) {
  const where = eq(apiCredentials.account_id, accountId);
  return selectPage(
    db.select(projection).from(apiCredentials).where(where).$dynamic(),
    db.$count(apiCredentials, where),
    [asc(apiCredentials.created_at), asc(apiCredentials.id)],
    page,
  );
}

export async function findCredential(db: Db, accountId: string, id: string): Promise<CredentialRow | null> {
  const [row] = await db
    .select(projection)
    .from(apiCredentials)
    .where(and(eq(apiCredentials.account_id, accountId), eq(apiCredentials.id, id)));
  return row ?? null;
}

/** Sets `revoked_at` once (a second revocation keeps the first time). */
export async function revokeCredential(db: Db, accountId: string, id: string, at: Date): Promise<boolean> {
  const found = await findCredential(db, accountId, id);
  if (!found) return false;
  if (!found.revoked_at) {
    await db
      .update(apiCredentials)
      .set({ revoked_at: at })
      .where(and(eq(apiCredentials.account_id, accountId), eq(apiCredentials.id, id)));
  }
  return true;
}

/** The ids among `ids` that are installs of the account. */
export async function installsOfAccount(db: Db, accountId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: installs.id })
    .from(installs)
    .where(and(eq(installs.account_id, accountId), inArray(installs.id, ids)));
  return rows.map((r) => r.id);
}
