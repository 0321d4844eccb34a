import { and, asc, count, eq, type SQL, sql } from 'drizzle-orm';
import { type Db, queryRows, type RowOf } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { installs, sites } from '../../db/schema.js';

const projection = {
  id: sites.id,
  account_id: sites.account_id,
  name: sites.name,
  group_name: sites.group_name,
  tags: sites.tags,
  sandbox: sites.sandbox,
  transferable: sites.transferable,
  created_at: sites.created_at,
};
export type SiteRow = RowOf<typeof projection>;

const installProjection = {
  id: installs.id,
  site_id: installs.site_id,
  account_id: installs.account_id,
  name: installs.name,
  environment: installs.environment,
  php_version: installs.php_version,
  is_multisite: installs.is_multisite,
};
export type SiteInstallRow = RowOf<typeof installProjection>;

/**
 * One page of sites, the total, and each site's installs (those `installWhere` lets the caller see),
 * in one statement: the total is an uncorrelated scalar subquery (an InitPlan, evaluated once) and the
 * installs a correlated `json_agg` per site. The page's ids are chosen first, as an array (an InitPlan
 * that reads only the index (account_id, created_at, id)), and the rows are then read by primary key:
 * a deep page skips index entries, not rows with their installs aggregated (offset 10,000 cost 10,000
 * aggregates before), and `= any(array(...))` keeps the planner off a hash join over the whole table. Raw rows skip the ORM's
 * row mapping, which was a third of this route's CPU (bench/README.md). Only a page that comes back empty while it could have skipped
 * rows (offset > 0, or limit 0) needs a second query for the total.
 */
export async function listSitesWithInstalls(db: Db, where: SQL, installWhere: SQL, page: Page) {
  const rows = await queryRows<SiteRow & { total: number | string; installs: SiteInstallRow[] }>(
    db,
    sql`select ${sites.id} as id, ${sites.account_id} as account_id, ${sites.name} as name,
        ${sites.group_name} as group_name, ${sites.tags} as tags, ${sites.sandbox} as sandbox,
        ${sites.transferable} as transferable, ${sites.created_at} as created_at,
        (select count(*) from ${sites} where ${where}) as total,
        coalesce((
          select json_agg(json_build_object(
            'id', ${installs.id}, 'site_id', ${installs.site_id}, 'account_id', ${installs.account_id},
            'name', ${installs.name}, 'environment', ${installs.environment},
            'php_version', ${installs.php_version}, 'is_multisite', ${installs.is_multisite}
          ) order by ${installs.created_at}, ${installs.id})
          from ${installs} where ${installs.site_id} = ${sites.id} and ${installWhere}
        ), '[]'::json) as installs
      from ${sites}
      where ${sites.id} = any(array(
        select ${sites.id} from ${sites} where ${where}
        order by ${sites.created_at}, ${sites.id}
        limit ${page.limit} offset ${page.offset}))
      order by ${sites.created_at}, ${sites.id}`,
  );
  const first = rows[0];
  // int8 is a string in node-postgres and a number in PGlite; timestamps are Dates in both.
  const shaped = rows.map(({ total: _, ...row }) => ({ ...row, created_at: new Date(row.created_at) }));
  if (first) return { count: Number(first.total), rows: shaped };
  if (page.offset === 0 && page.limit > 0) return { count: 0, rows: [] };
  const [total] = await db.select({ n: count() }).from(sites).where(where);
  return { count: Number(total?.n ?? 0), rows: [] };
}

/**
 * The installs of the given sites, filtered by `where` (the caller's visibility). The ids go as one
 * uuid[] parameter: an IN list of one parameter per id costs Drizzle far more to build (bench/README.md).
 */
export function installsOfSites(db: Db, siteIds: string[], where: SQL): Promise<SiteInstallRow[]> {
  if (siteIds.length === 0) return Promise.resolve([]);
  return db
    .select(installProjection)
    .from(installs)
    .where(and(sql`${installs.site_id} = any(${sql.param(siteIds)}::uuid[])`, where))
    .orderBy(asc(installs.created_at), asc(installs.id));
}

export function findSite(db: Db, id: string): Promise<SiteRow | null> {
  return db
    .select(projection)
    .from(sites)
    .where(eq(sites.id, id))
    .then((rows) => rows[0] ?? null);
}

export async function insertSite(db: Db, values: typeof sites.$inferInsert): Promise<SiteRow> {
  const [row] = await db.insert(sites).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateSite(db: Db, id: string, values: Partial<typeof sites.$inferInsert>) {
  // An empty change (a PATCH with no known field) is a read: UPDATE ... SET needs a column.
  const [row] =
    Object.keys(values).length === 0
      ? await db.select(projection).from(sites).where(eq(sites.id, id))
      : await db.update(sites).set(values).where(eq(sites.id, id)).returning(projection);
  return row ?? null;
}

/** Locks the site row for the rest of the transaction (serialises install placement and deletion). */
export async function lockSite(db: Db, id: string): Promise<SiteRow | null> {
  const rows = await db.select(projection).from(sites).where(eq(sites.id, id)).for('update');
  return rows[0] ?? null;
}

export async function countInstallsOfSite(db: Db, siteId: string): Promise<number> {
  const [row] = await db.select({ n: count() }).from(installs).where(eq(installs.site_id, siteId));
  return Number(row?.n ?? 0);
}

export async function deleteSite(db: Db, id: string): Promise<void> {
  await db.delete(sites).where(eq(sites.id, id));
}
