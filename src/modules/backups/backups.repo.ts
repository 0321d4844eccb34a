import { and, asc, desc, eq, inArray, isNotNull } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { backups } from '../../db/schema.js';
import type { Snapshot } from '../../drivers/driver.js';

const projection = {
  id: backups.id,
  account_id: backups.account_id,
  install_id: backups.install_id,
  operation_id: backups.operation_id,
  kind: backups.kind,
  status: backups.status,
  description: backups.description,
  wordpress_version: backups.wordpress_version,
  size_bytes: backups.size_bytes,
  snapshot: backups.snapshot,
  create_time: backups.create_time,
  complete_time: backups.complete_time,
};
export type BackupRow = RowOf<typeof projection>;

export async function insertBackup(tx: Db, values: typeof backups.$inferInsert): Promise<BackupRow> {
  const [row] = await tx.insert(backups).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function findBackup(db: Db, id: string): Promise<BackupRow | null> {
  const [row] = await db.select(projection).from(backups).where(eq(backups.id, id));
  return row ?? null;
}

export async function listBackups(db: Db, installId: string, page: Page) {
  const where = eq(backups.install_id, installId);
  return selectPage(
    db.select(projection).from(backups).where(where).$dynamic(),
    db.$count(backups, where),
    [desc(backups.create_time), desc(backups.id)],
    page,
  );
}

export async function updateBackup(tx: Db, id: string, values: Partial<typeof backups.$inferInsert>) {
  const [row] = await tx.update(backups).set(values).where(eq(backups.id, id)).returning(projection);
  return row ?? null;
}

/** Moves a backup that is not finished yet (requested or in_progress) to `values`. */
export async function updateUnfinished(tx: Db, id: string, values: Partial<typeof backups.$inferInsert>) {
  const [row] = await tx
    .update(backups)
    .set(values)
    .where(and(eq(backups.id, id), inArray(backups.status, ['requested', 'in_progress'])))
    .returning(projection);
  return row ?? null;
}

/** Issue 30 (decision #226): the completed backups of an install that hold a snapshot, oldest first. */
export function completedWithSnapshot(db: Db, installId: string) {
  return db
    .select({ id: backups.id, description: backups.description, snapshot: backups.snapshot })
    .from(backups)
    .where(
      and(eq(backups.install_id, installId), eq(backups.status, 'completed'), isNotNull(backups.snapshot)),
    )
    .orderBy(asc(backups.create_time), asc(backups.id));
}

/** Issue 30: how many backups of an install are not finished yet (requested or in progress). */
export async function countUnfinished(db: Db, installId: string): Promise<number> {
  return await db.$count(
    backups,
    and(eq(backups.install_id, installId), inArray(backups.status, ['requested', 'in_progress'])),
  );
}

/** Issue 30: a completed backup's snapshot replaced (its files carried to the install's new server). */
export async function replaceSnapshot(tx: Db, id: string, snapshot: Snapshot) {
  const [row] = await tx
    .update(backups)
    .set({ snapshot })
    .where(and(eq(backups.id, id), eq(backups.status, 'completed')))
    .returning({ id: backups.id });
  return row !== undefined;
}

export const snapshotOf = (row: BackupRow): Snapshot | null => (row.snapshot as Snapshot | null) ?? null;
