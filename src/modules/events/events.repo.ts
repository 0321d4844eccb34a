import { and, desc, eq, inArray, isNotNull, lt, or, type SQL, sql } from 'drizzle-orm';
import { type Db, queryRows, type RowOf } from '../../db/client.js';
import { events } from '../../db/schema.js';

const projection = {
  id: events.id,
  seq: events.seq,
  account_id: events.account_id,
  install_id: events.install_id,
  type: events.type,
  resource_type: events.resource_type,
  resource_id: events.resource_id,
  data: events.data,
  created_at: events.created_at,
};
export type EventRow = RowOf<typeof projection>;

export async function insertEvent(tx: Db, values: typeof events.$inferInsert): Promise<EventRow> {
  const [row] = await tx.insert(events).values(values).returning(projection);
  if (!row) throw new Error('insert into events returned no row');
  return row;
}

export interface EventFilter {
  accountId: string;
  since: Date;
  /** Only events after (older than) this one, newest first. */
  beforeSeq?: number;
  types?: string[];
  resourceId?: string;
  installId?: string;
  /** Partial members: only events of these installs (null: every event). */
  visibleInstalls: string[] | null;
  limit: number;
}

/** The seq of an event of the account (the cursor), or null. */
export async function seqOf(db: Db, accountId: string, id: string): Promise<number | null> {
  const [row] = await db
    .select({ seq: events.seq })
    .from(events)
    .where(and(eq(events.id, id), eq(events.account_id, accountId)));
  return row?.seq ?? null;
}

/** Newest first; one more row than `limit`, so the caller knows whether there is a next page. */
export function listEvents(db: Db, f: EventFilter): Promise<EventRow[]> {
  const where: (SQL | undefined)[] = [
    eq(events.account_id, f.accountId),
    sql`${events.created_at} >= ${f.since}`,
    f.beforeSeq !== undefined ? lt(events.seq, f.beforeSeq) : undefined,
    f.types && f.types.length > 0 ? inArray(events.type, f.types) : undefined,
    f.resourceId ? or(eq(events.resource_id, f.resourceId), eq(events.install_id, f.resourceId)) : undefined,
    f.installId ? eq(events.install_id, f.installId) : undefined,
    f.visibleInstalls
      ? f.visibleInstalls.length > 0
        ? and(isNotNull(events.install_id), inArray(events.install_id, f.visibleInstalls))
        : sql`false`
      : undefined,
  ];
  return db
    .select(projection)
    .from(events)
    .where(and(...where))
    .orderBy(desc(events.seq))
    .limit(f.limit + 1);
}

/** Deletes up to `batch` events created before `before`; answers how many. */
export async function deleteOlderThan(db: Db, before: Date, batch: number): Promise<number> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`delete from events where id in
          (select id from events where created_at < ${before} order by created_at limit ${batch})
        returning id`,
  );
  return rows.length;
}
