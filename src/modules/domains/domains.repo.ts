import { and, asc, eq, inArray, ne, sql } from 'drizzle-orm';
import { alias } from 'drizzle-orm/pg-core';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { domains } from '../../db/schema.js';

const target = alias(domains, 'redirect_target');

const projection = {
  id: domains.id,
  install_id: domains.install_id,
  name: domains.name,
  primary: domains.primary,
  secure_all_urls: domains.secure_all_urls,
  redirect_to_id: domains.redirect_to_id,
  redirect_to_name: target.name,
  ownership_status: domains.ownership_status,
  txt_verification_key: domains.txt_verification_key,
  txt_verification_value: domains.txt_verification_value,
  txt_verified_time: domains.txt_verified_time,
  txt_verified_domain: domains.txt_verified_domain,
  created_at: domains.created_at,
  // D3: a duplicate is a domain whose name is verified on another record (another install).
  duplicate: sql<boolean>`exists (select 1 from ${domains} as verified where verified.name = ${domains.name}
    and verified.ownership_status = 'TXT_VERIFIED' and verified.id <> ${domains.id})`.mapWith(Boolean),
};
/** The left-joined target name is null when the domain does not redirect. */
export type DomainRow = Omit<RowOf<typeof projection>, 'redirect_to_name'> & {
  redirect_to_name: string | null;
};

function select(db: Db) {
  return db.select(projection).from(domains).leftJoin(target, eq(target.id, domains.redirect_to_id));
}

export async function listDomains(db: Db, installId: string, page: Page) {
  const where = eq(domains.install_id, installId);
  return selectPage(
    select(db).where(where).$dynamic(),
    db.$count(domains, where),
    [asc(domains.created_at), asc(domains.id)],
    page,
  );
}

/** A domain of one install (null when it does not exist or belongs to another install). */
export async function findDomain(db: Db, installId: string, id: string): Promise<DomainRow | null> {
  const rows = await select(db).where(and(eq(domains.install_id, installId), eq(domains.id, id)));
  return rows[0] ?? null;
}

export function findDomainsByIds(db: Db, ids: string[]): Promise<DomainRow[]> {
  return ids.length === 0 ? Promise.resolve([]) : select(db).where(inArray(domains.id, ids));
}

export async function domainNames(db: Db, installId: string): Promise<string[]> {
  const rows = await db
    .select({ name: domains.name })
    .from(domains)
    .where(eq(domains.install_id, installId))
    .orderBy(asc(domains.created_at), asc(domains.id));
  return rows.map((r) => r.name);
}

/**
 * Issue 21: the install's domains as the web server routes them (the redirect target by name).
 * Issue 28 finding 8 (D6): only its verified domains. A name is verified on one record at most
 * (`domains_verified_name_key`), so it is served by one install only, the one that proved it owns it.
 */
export async function routesOf(db: Db, installId: string) {
  return db
    .select({
      name: domains.name,
      primary: domains.primary,
      redirect_to: target.name,
      secure_all_urls: domains.secure_all_urls,
    })
    .from(domains)
    .leftJoin(target, eq(target.id, domains.redirect_to_id))
    .where(and(eq(domains.install_id, installId), eq(domains.ownership_status, 'TXT_VERIFIED')))
    .orderBy(asc(domains.created_at), asc(domains.id));
}

/** Whether the install has a domain (in the caller's transaction). */
export async function hasDomains(db: Db, installId: string): Promise<boolean> {
  return (await db.$count(domains, eq(domains.install_id, installId))) > 0;
}

/** Of `names`, those the install already has. */
export async function namesOfInstall(db: Db, installId: string, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = await db
    .select({ name: domains.name })
    .from(domains)
    .where(and(eq(domains.install_id, installId), inArray(domains.name, names)));
  return new Set(rows.map((r) => r.name));
}

/** Of `names`, those verified on some install (D3: new records of them are duplicates). */
export async function verifiedNames(db: Db, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = await db
    .select({ name: domains.name })
    .from(domains)
    .where(and(inArray(domains.name, names), eq(domains.ownership_status, 'TXT_VERIFIED')));
  return new Set(rows.map((r) => r.name));
}

export async function insertDomains(db: Db, values: (typeof domains.$inferInsert)[]): Promise<string[]> {
  const rows = await db.insert(domains).values(values).returning({ id: domains.id });
  return rows.map((r) => r.id);
}

export async function updateDomain(db: Db, id: string, values: Partial<typeof domains.$inferInsert>) {
  if (Object.keys(values).length === 0) return; // nothing to change (UPDATE ... SET needs a column)
  await db.update(domains).set(values).where(eq(domains.id, id));
}

/** D4: the install's primary domain stops being primary. */
export async function clearPrimary(db: Db, installId: string): Promise<void> {
  await db
    .update(domains)
    .set({ primary: false })
    .where(and(eq(domains.install_id, installId), eq(domains.primary, true)));
}

/** D5: the names of the domains that redirect to `id`. */
export async function redirectSources(db: Db, id: string): Promise<string[]> {
  const rows = await db
    .select({ name: domains.name })
    .from(domains)
    .where(eq(domains.redirect_to_id, id))
    .orderBy(asc(domains.name));
  return rows.map((r) => r.name);
}

export async function deleteDomain(db: Db, id: string): Promise<boolean> {
  const rows = await db.delete(domains).where(eq(domains.id, id)).returning({ id: domains.id });
  return rows.length > 0;
}

/** D3: once `name` is verified elsewhere, its other records are duplicates and stop being primary. */
export async function demoteDuplicates(db: Db, name: string, verifiedId: string): Promise<string[]> {
  const rows = await db
    .update(domains)
    .set({ primary: false })
    .where(and(eq(domains.name, name), ne(domains.id, verifiedId), eq(domains.primary, true)))
    .returning({ install_id: domains.install_id });
  return rows.map((r) => r.install_id);
}
