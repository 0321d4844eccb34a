import { and, asc, count, eq, isNotNull } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { installs, localInstalls, localTasks, memberships, sites, users } from '../../db/schema.js';

export interface LocalInstallRow {
  install_id: string;
  db_name: string;
  db_user: string;
  password_sealed: string;
  /** Issue 21: the WordPress administrator's password, sealed; null once forgotten. */
  admin_password_sealed?: string | null;
}

export async function findInstall(db: Db, installId: string): Promise<LocalInstallRow | null> {
  const [row] = await db
    .select({
      install_id: localInstalls.install_id,
      db_name: localInstalls.db_name,
      db_user: localInstalls.db_user,
      password_sealed: localInstalls.password_sealed,
      admin_password_sealed: localInstalls.admin_password_sealed,
    })
    .from(localInstalls)
    .where(eq(localInstalls.install_id, installId));
  return row ?? null;
}

/** Stores the install's account unless a first attempt already did (then that one is kept). */
export async function insertInstall(db: Db, row: LocalInstallRow) {
  await db.insert(localInstalls).values(row).onConflictDoNothing();
}

export async function deleteInstall(db: Db, installId: string) {
  await db.delete(localInstalls).where(eq(localInstalls.install_id, installId));
}

export async function findTask(db: Db, key: string): Promise<{ result: unknown } | null> {
  const [row] = await db
    .select({ result: localTasks.result })
    .from(localTasks)
    .where(eq(localTasks.key, key));
  return row ?? null;
}

/** Records finished work; a second record of the same key keeps the first. */
export async function completeTask(
  db: Db,
  values: { key: string; operation: string; install_id: string | null; result: unknown; completed_at: Date },
) {
  await db.insert(localTasks).values(values).onConflictDoNothing();
}

/** How many times an operation was completed for an install (tests prove "once" with it). */
export async function countCompleted(db: Db, installId: string, operation: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(localTasks)
    .where(and(eq(localTasks.install_id, installId), eq(localTasks.operation, operation)));
  return Number(row?.n ?? 0);
}

export async function deleteTasksOf(db: Db, installId: string) {
  await db.delete(localTasks).where(eq(localTasks.install_id, installId));
}

/** `hostplane reseal`: every install's sealed database password. */
export function sealedPasswords(tx: Db) {
  return tx
    .select({ install_id: localInstalls.install_id, sealed: localInstalls.password_sealed })
    .from(localInstalls);
}

export async function setPassword(tx: Db, installId: string, sealed: string) {
  await tx
    .update(localInstalls)
    .set({ password_sealed: sealed })
    .where(eq(localInstalls.install_id, installId));
}

/** Issue 21: the provisioning job stored the administrator's password: the driver's copy goes. */
export async function clearAdminPassword(db: Db, installId: string) {
  await db
    .update(localInstalls)
    .set({ admin_password_sealed: null })
    .where(eq(localInstalls.install_id, installId));
}

/** `hostplane reseal`: every administrator password still kept (sealed). */
export function sealedAdminPasswords(tx: Db) {
  return tx
    .select({ install_id: localInstalls.install_id, sealed: localInstalls.admin_password_sealed })
    .from(localInstalls)
    .where(isNotNull(localInstalls.admin_password_sealed));
}

export async function setAdminPassword(tx: Db, installId: string, sealed: string) {
  await tx
    .update(localInstalls)
    .set({ admin_password_sealed: sealed })
    .where(eq(localInstalls.install_id, installId));
}

/**
 * Issue 21: what WordPress's installer needs about an install: its site's name (the title; the
 * install's name when it has no site) and the e-mail of its account's first owner.
 */
export async function installerFacts(
  db: Db,
  installId: string,
): Promise<{ title: string; email: string } | null> {
  const [row] = await db
    .select({ install: installs.name, site: sites.name, email: users.email })
    .from(installs)
    .leftJoin(sites, eq(sites.id, installs.site_id))
    .leftJoin(
      memberships,
      and(eq(memberships.account_id, installs.account_id), eq(memberships.roles, 'owner')),
    )
    .leftJoin(users, eq(users.id, memberships.user_id))
    .where(eq(installs.id, installId))
    .orderBy(asc(memberships.created_at))
    .limit(1);
  if (!row) return null;
  return { title: row.site ?? row.install, email: row.email ?? 'owner@invalid.invalid' };
}
