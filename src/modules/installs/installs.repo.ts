import { and, asc, eq, ne, type SQL, sql } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { domains, installPlacements, installs, servers } from '../../db/schema.js';

const projection = {
  id: installs.id,
  account_id: installs.account_id,
  site_id: installs.site_id,
  name: installs.name,
  environment: installs.environment,
  status: installs.status,
  php_version: installs.php_version,
  wp_version: installs.wp_version,
  is_multisite: installs.is_multisite,
  stable_ips: installs.stable_ips,
  primary_domain: installs.primary_domain,
  defer_wordpress_upgrades_until: installs.defer_wordpress_upgrades_until,
  maintenance_mode: installs.maintenance_mode,
  created_at: installs.created_at,
  /**
   * Issue 30: the IPv4 addresses of the hosting server the install is placed on (null: not placed,
   * e.g. the local driver): its domains' A records (docs/decisions.md #167).
   */
  server_ipv4: sql<string[] | null>`(select ${servers.ipv4} from ${installPlacements}
    join ${servers} on ${servers.id} = ${installPlacements.server_id}
    where ${installPlacements.install_id} = ${installs.id})`,
};
export type InstallRow = RowOf<typeof projection>;

export async function listInstalls(db: Db, where: SQL, page: Page) {
  return selectPage(
    db.select(projection).from(installs).where(where).$dynamic(),
    db.$count(installs, where),
    [asc(installs.created_at), asc(installs.id)],
    page,
  );
}

export function findInstall(db: Db, id: string): Promise<InstallRow | null> {
  return db
    .select(projection)
    .from(installs)
    .where(eq(installs.id, id))
    .then((rows) => rows[0] ?? null);
}

/** The install, locked until the transaction ends (operations on it serialise here). */
export async function lockInstall(tx: Db, id: string): Promise<InstallRow | null> {
  const [row] = await tx.select(projection).from(installs).where(eq(installs.id, id)).for('update');
  return row ?? null;
}

export async function nameTaken(db: Db, name: string): Promise<boolean> {
  const rows = await db.select({ id: installs.id }).from(installs).where(eq(installs.name, name)).limit(1);
  return rows.length > 0;
}

/** I4: the install already filling `environment` on `siteId`, other than `exceptId`. */
export async function occupant(db: Db, siteId: string, environment: string, exceptId?: string) {
  const rows = await db
    .select({ id: installs.id, name: installs.name })
    .from(installs)
    .where(
      and(
        eq(installs.site_id, siteId),
        eq(installs.environment, environment),
        exceptId ? ne(installs.id, exceptId) : undefined,
      ),
    )
    .limit(1);
  return rows[0] ?? null;
}

export async function insertInstall(db: Db, values: typeof installs.$inferInsert): Promise<InstallRow> {
  const [row] = await db.insert(installs).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateInstall(db: Db, id: string, values: Partial<typeof installs.$inferInsert>) {
  // An empty change (a PATCH with no known field) is a read: UPDATE ... SET needs a column.
  const [row] =
    Object.keys(values).length === 0
      ? await db.select(projection).from(installs).where(eq(installs.id, id))
      : await db.update(installs).set(values).where(eq(installs.id, id)).returning(projection);
  return row ?? null;
}

export async function deleteInstall(db: Db, id: string): Promise<boolean> {
  const rows = await db.delete(installs).where(eq(installs.id, id)).returning({ id: installs.id });
  return rows.length > 0;
}

/** D4: `primary_domain` names the primary domain, or the install's own cname when it has none. */
export async function setPrimaryDomain(db: Db, id: string, name: string | null, installDomain: string) {
  await db
    .update(installs)
    .set({ primary_domain: name ?? sql`${installs.name} || ${`.${installDomain}`}` })
    .where(eq(installs.id, id));
}

/** Issue 22 (dry run): the domain names of an install, in name order. */
export async function domainNames(db: Db, installId: string): Promise<string[]> {
  const rows = await db
    .select({ name: domains.name })
    .from(domains)
    .where(eq(domains.install_id, installId))
    .orderBy(asc(domains.name));
  return rows.map((r) => r.name);
}
