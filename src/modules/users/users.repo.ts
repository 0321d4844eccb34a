import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { credentials, installs, membershipInstalls, memberships, type Role, users } from '../../db/schema.js';

const projection = {
  id: users.id,
  email: users.email,
  first_name: users.first_name,
  last_name: users.last_name,
  phone: users.phone,
  invite_accepted: users.invite_accepted,
  mfa_enabled: users.mfa_enabled,
  created_at: users.created_at,
};
export type UserRow = RowOf<typeof projection>;

export function findUser(db: Db, id: string): Promise<UserRow | null> {
  return db
    .select(projection)
    .from(users)
    .where(eq(users.id, id))
    .then((rows) => rows[0] ?? null);
}

export function findUserByEmail(db: Db, email: string): Promise<UserRow | null> {
  return db
    .select(projection)
    .from(users)
    .where(sql`lower(${users.email}) = lower(${email})`)
    .then((rows) => rows[0] ?? null);
}

export async function insertUser(db: Db, values: typeof users.$inferInsert): Promise<UserRow> {
  const [row] = await db.insert(users).values(values).returning(projection);
  if (!row) throw new Error('insert returned no row');
  return row;
}

/** Sets a user's roles on an account and, for partial roles, its install_ids (replacing earlier ones). */
export async function putMembership(
  db: Db,
  accountId: string,
  userId: string,
  roles: Role,
  installIds: string[],
) {
  await db
    .insert(memberships)
    .values({ account_id: accountId, user_id: userId, roles })
    .onConflictDoUpdate({ target: [memberships.account_id, memberships.user_id], set: { roles } });
  await db
    .delete(membershipInstalls)
    .where(and(eq(membershipInstalls.account_id, accountId), eq(membershipInstalls.user_id, userId)));
  if (installIds.length > 0) {
    await db
      .insert(membershipInstalls)
      .values(installIds.map((install_id) => ({ account_id: accountId, user_id: userId, install_id })));
  }
}

export async function deleteMembership(db: Db, accountId: string, userId: string): Promise<boolean> {
  const rows = await db
    .delete(memberships)
    .where(and(eq(memberships.account_id, accountId), eq(memberships.user_id, userId)))
    .returning({ user_id: memberships.user_id });
  return rows.length > 0;
}

/** The ids among `ids` that are installs of `accountId`. */
export async function installIdsOfAccount(db: Db, accountId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: installs.id })
    .from(installs)
    .where(and(eq(installs.account_id, accountId), inArray(installs.id, ids)));
  return rows.map((r) => r.id);
}

export async function listMemberships(db: Db, userId: string) {
  const rows = await db
    .select({ account_id: memberships.account_id, roles: memberships.roles })
    .from(memberships)
    .where(eq(memberships.user_id, userId));
  const scoped = await db
    .select({ account_id: membershipInstalls.account_id, install_id: membershipInstalls.install_id })
    .from(membershipInstalls)
    .where(eq(membershipInstalls.user_id, userId));
  return rows.map((r) => ({
    account_id: r.account_id,
    roles: r.roles,
    install_ids: scoped.filter((s) => s.account_id === r.account_id).map((s) => s.install_id),
  }));
}

export async function insertCredential(db: Db, userId: string, username: string, passwordHash: string) {
  await db.insert(credentials).values({ user_id: userId, username, password_hash: passwordHash });
}

export async function setMfaEnabled(db: Db, userId: string, value: boolean) {
  await db.update(users).set({ mfa_enabled: value }).where(eq(users.id, userId));
}
