import { and, asc, eq, gte, lte, type SQL, sql } from 'drizzle-orm';
import { type Db, queryRows } from '../../db/client.js';
import { installs, installUsageDaily } from '../../db/schema.js';
import { METRICS, type Metric, STORAGE_METRICS, type Values } from './usage-values.js';

// int8 as text: node-postgres answers strings but PGlite numbers, which round above 2^53.
const projection = {
  date: installUsageDaily.date,
  install_id: installUsageDaily.install_id,
  ...Object.fromEntries(METRICS.map((m) => [m, sql<string | null>`${installUsageDaily[m]}::text`])),
} as { date: typeof installUsageDaily.date; install_id: typeof installUsageDaily.install_id } & {
  [M in Metric]: SQL<string | null>;
};
/** One day of one install; every metric an int64 decimal string or null. */
export type DailyRow = { date: string; install_id: string } & Values;

/** M9: a recalculation writes the day's storage metrics (other metrics of the day stay). */
export async function upsertStorage(
  tx: Db,
  installId: string,
  date: string,
  values: { storage_file_bytes: string; storage_database_bytes: string },
) {
  await tx
    .insert(installUsageDaily)
    .values({ install_id: installId, date, ...values })
    .onConflictDoUpdate({ target: [installUsageDaily.install_id, installUsageDaily.date], set: values });
}

/** One ingested row: metrics absent from `values` keep their stored value; null clears it. */
export interface IngestRow {
  install_id: string;
  date: string;
  values: Partial<Values>;
}

/**
 * POST /admin/v1/usage: upsert many days at once, in the caller's transaction. The rows travel as one
 * jsonb parameter (10,000 rows x 10 columns would exceed PostgreSQL's 65,535 bind parameters), and
 * values as decimal strings cast to bigint in SQL, so no value passes through a float. First the
 * missing (install, day) rows are created empty, then one UPDATE sets exactly the metrics each row
 * names: absent keeps, null clears. Both steps are idempotent and safe under concurrent ingests.
 */
export async function ingest(tx: Db, rows: IngestRow[]): Promise<void> {
  if (rows.length === 0) return;
  const input = JSON.stringify(rows.map((r) => ({ i: r.install_id, d: r.date, ...r.values })));
  await tx.execute(sql`insert into ${installUsageDaily} (install_id, date)
    select (e->>'i')::uuid, (e->>'d')::date from jsonb_array_elements(${input}::jsonb) e
    on conflict do nothing`);
  const sets = METRICS.map((m) =>
    sql.raw(`${m} = case when e ? '${m}' then (e->>'${m}')::bigint else u.${m} end`),
  );
  await tx.execute(sql`update ${installUsageDaily} u set ${sql.join(sets, sql`, `)}
    from jsonb_array_elements(${input}::jsonb) e
    where u.install_id = (e->>'i')::uuid and u.date = (e->>'d')::date`);
}

/** The ids among `ids` that are installs. */
export async function existingInstalls(db: Db, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .select({ id: installs.id })
    .from(installs)
    .where(sql`${installs.id} = any(${sql.param(ids)}::uuid[])`);
  return new Set(rows.map((r) => r.id));
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

/** The daily rows of several installs in a range (the per-environment account usage page). */
export function listDailyOf(db: Db, installIds: string[], first: string, last: string): Promise<DailyRow[]> {
  if (installIds.length === 0) return Promise.resolve([]);
  return db
    .select(projection)
    .from(installUsageDaily)
    .where(
      and(
        sql`${installUsageDaily.install_id} = any(${sql.param(installIds)}::uuid[])`,
        gte(installUsageDaily.date, first),
        lte(installUsageDaily.date, last),
      ),
    )
    .orderBy(asc(installUsageDaily.install_id), asc(installUsageDaily.date));
}

/** Each storage metric's last known value before `before`, per install: where a filled series starts. */
export interface StorageSeed {
  install_id: string;
  storage_file_bytes: string | null;
  storage_database_bytes: string | null;
}

/** The last storage figures of each install strictly before `before` (one index probe per metric). */
export function storageBefore(db: Db, installIds: string[], before: string): Promise<StorageSeed[]> {
  if (installIds.length === 0) return Promise.resolve([]);
  const latest = STORAGE_METRICS.map((m) => {
    const col = sql.raw(m);
    return sql`(select u.${col}::text from ${installUsageDaily} u where u.install_id = i.id
      and u.date < ${before}::date and u.${col} is not null order by u.date desc limit 1) as ${col}`;
  });
  return queryRows<StorageSeed>(
    db,
    sql`select i.id as install_id, ${sql.join(latest, sql`, `)}
      from unnest(${sql.param(installIds)}::uuid[]) as i(id)`,
  );
}

/** Which installs an account query covers: the account's, or (A2, partial members) some of them. */
export interface Scope {
  accountId: string;
  /** null: every install of the account. */
  installIds: string[] | null;
}

export function scopeWhere(scope: Scope): SQL {
  const account = sql`i.account_id = ${scope.accountId}`;
  return scope.installIds === null
    ? account
    : sql`${account} and i.id = any(${sql.param(scope.installIds)}::uuid[])`;
}
