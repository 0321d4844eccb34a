import { and, asc, desc, eq, inArray, isNull, or, type SQL, sql } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import {
  accounts,
  backups,
  installs,
  membershipInstalls,
  memberships,
  operations,
  sites,
  siteTransfers,
  users,
} from '../../db/schema.js';

const projection = {
  id: siteTransfers.id,
  site_id: siteTransfers.site_id,
  origin_account_id: siteTransfers.origin_account_id,
  destination_account_id: siteTransfers.destination_account_id,
  operation_id: siteTransfers.operation_id,
  status: siteTransfers.status,
  site_name: siteTransfers.site_name,
  install_names: siteTransfers.install_names,
  origin_account_name: siteTransfers.origin_account_name,
  destination_account_name: siteTransfers.destination_account_name,
  scheduled_time: siteTransfers.scheduled_time,
  maintenance_mode: siteTransfers.maintenance_mode,
  created_at: siteTransfers.created_at,
  updated_at: siteTransfers.updated_at,
};
export type TransferRow = RowOf<typeof projection>;

/** The unique index that keeps one active transfer per site (T7). */
export const ONE_ACTIVE_KEY = 'site_transfers_one_active_key';

export async function insertTransfer(
  tx: Db,
  values: typeof siteTransfers.$inferInsert,
): Promise<TransferRow> {
  const [row] = await tx.insert(siteTransfers).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function findTransfer(db: Db, id: string): Promise<TransferRow | null> {
  const [row] = await db.select(projection).from(siteTransfers).where(eq(siteTransfers.id, id));
  return row ?? null;
}

export async function lockTransfer(tx: Db, id: string): Promise<TransferRow | null> {
  const [row] = await tx.select(projection).from(siteTransfers).where(eq(siteTransfers.id, id)).for('update');
  return row ?? null;
}

export async function updateTransfer(
  tx: Db,
  id: string,
  values: Partial<typeof siteTransfers.$inferInsert>,
): Promise<TransferRow> {
  const [row] = await tx
    .update(siteTransfers)
    .set(values)
    .where(eq(siteTransfers.id, id))
    .returning(projection);
  if (!row) throw new Error(`site transfer ${id} vanished`);
  return row;
}

/** The site's active transfer (pending, scheduled or in_progress), if any. */
export async function activeOfSite(tx: Db, siteId: string): Promise<TransferRow | null> {
  const [row] = await tx
    .select(projection)
    .from(siteTransfers)
    .where(
      and(
        eq(siteTransfers.site_id, siteId),
        inArray(siteTransfers.status, ['pending', 'scheduled', 'in_progress']),
      ),
    )
    .limit(1);
  return row ?? null;
}

async function listWhere(db: Db, where: SQL | undefined, page: Page) {
  return selectPage(
    db.select(projection).from(siteTransfers).where(where).$dynamic(),
    db.$count(siteTransfers, where),
    [desc(siteTransfers.created_at), desc(siteTransfers.id)],
    page,
  );
}

/** T1: the transfers initiated from an account (whatever became of the site since). */
export const listOfAccount = (db: Db, accountId: string, page: Page) =>
  listWhere(db, eq(siteTransfers.origin_account_id, accountId), page);

export const listOfSite = (db: Db, siteId: string, page: Page) =>
  listWhere(db, eq(siteTransfers.site_id, siteId), page);

/** T10: the install names of a site now (the snapshot of a new transfer). */
export async function installNamesOfSite(tx: Db, siteId: string): Promise<string[]> {
  const rows = await tx
    .select({ name: installs.name })
    .from(installs)
    .where(eq(installs.site_id, siteId))
    .orderBy(asc(installs.name));
  return rows.map((r) => r.name);
}

export async function installIdsOfSite(tx: Db, siteId: string): Promise<string[]> {
  const rows = await tx.select({ id: installs.id }).from(installs).where(eq(installs.site_id, siteId));
  return rows.map((r) => r.id);
}

/** With `maintenance_mode`, the site's installs show as in maintenance while the transfer runs. */
export async function setMaintenance(tx: Db, siteId: string, on: boolean): Promise<void> {
  await tx.update(installs).set({ maintenance_mode: on }).where(eq(installs.site_id, siteId));
}

/** The e-mail addresses of the owners of some accounts (the transfer's notification). */
export async function ownerEmails(tx: Db, accountIds: string[]): Promise<string[]> {
  const rows = await tx
    .select({ email: users.email })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.user_id))
    .where(and(inArray(memberships.account_id, accountIds), eq(memberships.roles, 'owner')))
    .orderBy(asc(users.email));
  return [...new Set(rows.map((r) => r.email.toLowerCase()))];
}

/** The site's account now (the job checks the site has not moved or gone since the request). */
export async function lockSiteRow(tx: Db, siteId: string) {
  const [row] = await tx
    .select({
      id: sites.id,
      name: sites.name,
      account_id: sites.account_id,
      sandbox: sites.sandbox,
      transferable: sites.transferable,
    })
    .from(sites)
    .where(eq(sites.id, siteId))
    .for('update');
  return row ?? null;
}

export async function findAccountRow(tx: Db, accountId: string) {
  const [row] = await tx
    .select({
      id: accounts.id,
      name: accounts.name,
      sites_enabled: accounts.sites_enabled,
      preferred_data_center: accounts.preferred_data_center,
    })
    .from(accounts)
    .where(eq(accounts.id, accountId));
  return row ?? null;
}

/**
 * T11: the site and everything under it changes account, in the caller's transaction. The site row
 * is locked first and the installs are updated before the rows that copy their account_id (backups,
 * operations), so an operation created concurrently either commits first and is moved here, or waits
 * on the install row and then reads the new account. Domains, certificates, usage rows and report
 * schedules hang off install_id / site_id and follow without a write. Partial members' install_ids
 * that name the moved installs are dropped (A2): those installs are no longer of their account.
 */
export async function moveSite(
  tx: Db,
  move: { siteId: string; destinationAccountId: string },
): Promise<{ installIds: string[] }> {
  const { siteId, destinationAccountId } = move;
  await tx.update(sites).set({ account_id: destinationAccountId }).where(eq(sites.id, siteId));
  const moved = await tx
    .update(installs)
    .set({ account_id: destinationAccountId, maintenance_mode: false })
    .where(eq(installs.site_id, siteId))
    .returning({ id: installs.id });
  const installIds = moved.map((r) => r.id);
  const transfersOfSite = tx
    .select({ id: siteTransfers.id })
    .from(siteTransfers)
    .where(eq(siteTransfers.site_id, siteId));
  await tx
    .update(operations)
    .set({ account_id: destinationAccountId })
    .where(
      or(
        installIds.length > 0 ? inArray(operations.install_id, installIds) : sql`false`,
        and(isNull(operations.install_id), inArray(operations.resource_id, transfersOfSite)),
      ),
    );
  if (installIds.length > 0) {
    await tx
      .update(backups)
      .set({ account_id: destinationAccountId })
      .where(inArray(backups.install_id, installIds));
    await tx.delete(membershipInstalls).where(inArray(membershipInstalls.install_id, installIds));
  }
  return { installIds };
}
