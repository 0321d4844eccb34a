import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { domainReports } from '../../db/schema.js';

const projection = {
  id: domainReports.id,
  install_id: domainReports.install_id,
  domain_id: domainReports.domain_id,
  domain_name: domainReports.domain_name,
  result: domainReports.result,
  created_at: domainReports.created_at,
  completed_at: domainReports.completed_at,
};
export type ReportRow = RowOf<typeof projection>;

export async function insertReport(tx: Db, values: typeof domainReports.$inferInsert): Promise<ReportRow> {
  const [row] = await tx.insert(domainReports).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function findReport(db: Db, id: string): Promise<ReportRow | null> {
  const [row] = await db.select(projection).from(domainReports).where(eq(domainReports.id, id));
  return row ?? null;
}

/** The install's newest report (the 5-second limit of checkStatus). */
export async function latestReport(tx: Db, installId: string): Promise<ReportRow | null> {
  const [row] = await tx
    .select(projection)
    .from(domainReports)
    .where(eq(domainReports.install_id, installId))
    .orderBy(desc(domainReports.created_at))
    .limit(1);
  return row ?? null;
}

/** Records the result once: a report that is already complete keeps its first result. */
export async function completeReport(db: Db, id: string, result: unknown, now: Date) {
  await db
    .update(domainReports)
    .set({ result, completed_at: now })
    .where(and(eq(domainReports.id, id), isNull(domainReports.completed_at)));
}
