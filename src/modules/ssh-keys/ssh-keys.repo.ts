import { and, asc, eq } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { sshKeys } from '../../db/schema.js';

const projection = {
  id: sshKeys.id,
  comment: sshKeys.comment,
  fingerprint: sshKeys.fingerprint,
  created_at: sshKeys.created_at,
};
export type SshKeyRow = RowOf<typeof projection>;

export async function listKeys(db: Db, userId: string, page: Page) {
  const where = eq(sshKeys.user_id, userId);
  return selectPage(
    db.select(projection).from(sshKeys).where(where).$dynamic(),
    db.$count(sshKeys, where),
    [asc(sshKeys.created_at), asc(sshKeys.id)],
    page,
  );
}

/** Inserts a key; null when its fingerprint is already registered (by anyone). */
export async function insertKey(db: Db, values: typeof sshKeys.$inferInsert): Promise<SshKeyRow | null> {
  const [row] = await db.insert(sshKeys).values(values).onConflictDoNothing().returning(projection);
  return row ?? null;
}

export async function deleteKey(db: Db, userId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(sshKeys)
    .where(and(eq(sshKeys.id, id), eq(sshKeys.user_id, userId)))
    .returning({ id: sshKeys.id });
  return rows.length > 0;
}
