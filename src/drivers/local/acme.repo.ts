import { eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { acmeAccounts, acmeOrders } from '../../db/schema.js';

/** Issue 21: the ACME account of a directory and the orders of driver call keys (acme.ts). */

export interface AcmeAccountRow {
  directory_url: string;
  key_sealed: string;
  account_url: string | null;
}

export async function findAccount(db: Db, directoryUrl: string): Promise<AcmeAccountRow | null> {
  const [row] = await db
    .select({
      directory_url: acmeAccounts.directory_url,
      key_sealed: acmeAccounts.key_sealed,
      account_url: acmeAccounts.account_url,
    })
    .from(acmeAccounts)
    .where(eq(acmeAccounts.directory_url, directoryUrl));
  return row ?? null;
}

/** The first key made for a directory is kept (a second process's is dropped): read it back after. */
export async function insertAccount(db: Db, row: { directory_url: string; key_sealed: string }) {
  await db.insert(acmeAccounts).values(row).onConflictDoNothing();
}

export async function setAccountUrl(db: Db, directoryUrl: string, accountUrl: string) {
  await db
    .update(acmeAccounts)
    .set({ account_url: accountUrl })
    .where(eq(acmeAccounts.directory_url, directoryUrl));
}

export interface AcmeOrderRow {
  key: string;
  install_id: string;
  directory_url: string;
  key_sealed: string;
  order_url: string | null;
  chain_pem: string | null;
}

const orderColumns = {
  key: acmeOrders.key,
  install_id: acmeOrders.install_id,
  directory_url: acmeOrders.directory_url,
  key_sealed: acmeOrders.key_sealed,
  order_url: acmeOrders.order_url,
  chain_pem: acmeOrders.chain_pem,
};

export async function findOrder(db: Db, key: string): Promise<AcmeOrderRow | null> {
  const [row] = await db.select(orderColumns).from(acmeOrders).where(eq(acmeOrders.key, key));
  return row ?? null;
}

/** A first attempt's certificate key is kept: the row is inserted once, then read back. */
export async function insertOrder(
  db: Db,
  row: { key: string; install_id: string; directory_url: string; key_sealed: string },
) {
  await db.insert(acmeOrders).values(row).onConflictDoNothing();
}

export async function setOrderUrl(db: Db, key: string, orderUrl: string) {
  await db.update(acmeOrders).set({ order_url: orderUrl }).where(eq(acmeOrders.key, key));
}

export async function setChain(db: Db, key: string, chainPem: string) {
  await db.update(acmeOrders).set({ chain_pem: chainPem }).where(eq(acmeOrders.key, key));
}

export async function deleteOrdersOf(db: Db, installId: string) {
  await db.delete(acmeOrders).where(eq(acmeOrders.install_id, installId));
}

/** `hostplane reseal`: every sealed ACME key (accounts and orders) with its sealing context. */
export async function sealedKeys(db: Db) {
  const accounts = await db
    .select({ id: acmeAccounts.directory_url, sealed: acmeAccounts.key_sealed })
    .from(acmeAccounts);
  const orders = await db.select({ id: acmeOrders.key, sealed: acmeOrders.key_sealed }).from(acmeOrders);
  return { accounts, orders };
}

export async function setAccountKey(db: Db, directoryUrl: string, sealed: string) {
  await db
    .update(acmeAccounts)
    .set({ key_sealed: sealed })
    .where(eq(acmeAccounts.directory_url, directoryUrl));
}

export async function setOrderKey(db: Db, key: string, sealed: string) {
  await db.update(acmeOrders).set({ key_sealed: sealed }).where(eq(acmeOrders.key, key));
}
