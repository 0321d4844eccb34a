import { and, asc, eq, gte, lte } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { installUsageDaily } from '../../db/schema.js';

const projection = {
  date: installUsageDaily.date,
  visit_count: installUsageDaily.visit_count,
  billable_visits: installUsageDaily.billable_visits,
  network_origin_bytes: installUsageDaily.network_origin_bytes,
  network_cdn_bytes: installUsageDaily.network_cdn_bytes,
  network_total_bytes: installUsageDaily.network_total_bytes,
  storage_file_bytes: installUsageDaily.storage_file_bytes,
  storage_database_bytes: installUsageDaily.storage_database_bytes,
  request_origin_count: installUsageDaily.request_origin_count,
};
export type DailyRow = RowOf<typeof projection>;

/** M9: a recalculation writes the day's storage metrics (other metrics of the day stay). */
export async function upsertStorage(
  tx: Db,
  installId: string,
  date: string,
  values: { storage_file_bytes: number; storage_database_bytes: number },
) {
  await tx
    .insert(installUsageDaily)
    .values({ install_id: installId, date, ...values })
    .onConflictDoUpdate({ target: [installUsageDaily.install_id, installUsageDaily.date], set: values });
}

export function listDaily(db: Db, installId: string, first: string, last: string): Promise<DailyRow[]> {
  return db
    .select(projection)
    .from(installUsageDaily)
    .where(
      and(
        eq(installUsageDaily.install_id, installId),
        gte(installUsageDaily.date, first),
        lte(installUsageDaily.date, last),
      ),
    )
    .orderBy(asc(installUsageDaily.date));
}
