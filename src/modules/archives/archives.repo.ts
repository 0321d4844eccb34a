import { and, desc, eq } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { backups, operations } from '../../db/schema.js';

// An archive is the export of one backup: the backup row and the operation that made it.
const projection = {
  id: backups.id,
  install_id: backups.install_id,
  status: backups.status,
  description: backups.description,
  snapshot: backups.snapshot,
  create_time: backups.create_time,
  complete_time: backups.complete_time,
  started_at: operations.started_at,
  ended_at: operations.completed_at,
  operation_input: operations.input,
};
export type ArchiveRow = RowOf<typeof projection>;

export async function listArchives(db: Db, installId: string, page: Page) {
  const where = eq(backups.install_id, installId);
  const query = db
    .select(projection)
    .from(backups)
    .leftJoin(operations, eq(operations.id, backups.operation_id))
    .where(where);
  return selectPage(
    query.$dynamic(),
    db.$count(backups, where),
    [desc(backups.create_time), desc(backups.id)],
    page,
  );
}

export async function findArchive(db: Db, installId: string, id: string): Promise<ArchiveRow | null> {
  const [row] = await db
    .select(projection)
    .from(backups)
    .leftJoin(operations, eq(operations.id, backups.operation_id))
    .where(and(eq(backups.install_id, installId), eq(backups.id, id)));
  return row ?? null;
}
