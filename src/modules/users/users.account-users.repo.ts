import { and, asc, count, eq, inArray, isNull, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import {
  accounts,
  credentials,
  installs,
  invitations,
  membershipInstalls,
  memberships,
  type Role,
  users,
} from '../../db/schema.js';

/** One member of an account as the AccountUser record needs it. */
export interface AccountUserRow {
  user_id: string;
  account_id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone: string | null;
  mfa_enabled: boolean;
  invite_accepted: boolean;
  roles: Role;
  installs: { id: string; name: string }[];
}

const memberProjection = {
  user_id: memberships.user_id,
  account_id: memberships.account_id,
  first_name: users.first_name,
  last_name: users.last_name,
  email: users.email,
  phone: users.phone,
  mfa_enabled: users.mfa_enabled,
  // A membership made by an operator has no invitation: it counts as accepted.
  invite_accepted: sql<boolean>`(${invitations.user_id} is null or ${invitations.accepted_at} is not null)`,
  roles: memberships.roles,
};

function membersQuery(db: Db, where: SQL | undefined) {
  return db
    .select(memberProjection)
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.user_id))
    .leftJoin(
      invitations,
      and(eq(invitations.account_id, memberships.account_id), eq(invitations.user_id, memberships.user_id)),
    )
    .where(where);
}

/** The installs (id, name) of each partial member, by user id. */
async function scopesOf(db: Db, accountId: string, userIds: string[]) {
  const out = new Map<string, { id: string; name: string }[]>();
  if (userIds.length === 0) return out;
  const rows = await db
    .select({ user_id: membershipInstalls.user_id, id: installs.id, name: installs.name })
    .from(membershipInstalls)
    .innerJoin(installs, eq(installs.id, membershipInstalls.install_id))
    .where(and(eq(membershipInstalls.account_id, accountId), inArray(membershipInstalls.user_id, userIds)))
    .orderBy(asc(installs.name));
  for (const r of rows) out.set(r.user_id, [...(out.get(r.user_id) ?? []), { id: r.id, name: r.name }]);
  return out;
}

async function withScopes(db: Db, accountId: string, rows: Omit<AccountUserRow, 'installs'>[]) {
  const scopes = await scopesOf(
    db,
    accountId,
    rows.filter((r) => r.roles.startsWith('partial')).map((r) => r.user_id),
  );
  return rows.map((r) => ({
    ...r,
    invite_accepted: Boolean(r.invite_accepted),
    installs: scopes.get(r.user_id) ?? [],
  }));
}

export async function listAccountUsers(db: Db, accountId: string, page: Page) {
  const where = eq(memberships.account_id, accountId);
  const { count, rows } = await selectPage(
    membersQuery(db, where).$dynamic(),
    db.$count(memberships, where),
    [asc(memberships.created_at), asc(memberships.user_id)],
    page,
  );
  return { count, rows: await withScopes(db, accountId, rows) };
}

export async function findAccountUser(
  db: Db,
  accountId: string,
  userId: string,
): Promise<AccountUserRow | null> {
  const rows = await membersQuery(
    db,
    and(eq(memberships.account_id, accountId), eq(memberships.user_id, userId)),
  );
  const [row] = await withScopes(db, accountId, rows);
  return row ?? null;
}

export async function countOwners(db: Db, accountId: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(memberships)
    .where(and(eq(memberships.account_id, accountId), eq(memberships.roles, 'owner')));
  return Number(row?.n ?? 0);
}

/** Locks the account row: membership changes of one account run one at a time (last-owner guard). */
export async function lockAccount(tx: Db, accountId: string): Promise<{ id: string; name: string } | null> {
  const [row] = await tx
    .select({ id: accounts.id, name: accounts.name })
    .from(accounts)
    .where(eq(accounts.id, accountId))
    .for('update');
  return row ?? null;
}

export async function roleOf(db: Db, accountId: string, userId: string): Promise<Role | null> {
  const [row] = await db
    .select({ roles: memberships.roles })
    .from(memberships)
    .where(and(eq(memberships.account_id, accountId), eq(memberships.user_id, userId)));
  return row?.roles ?? null;
}

/** The install ids of a member's scope (A2). */
export async function scopeOf(db: Db, accountId: string, userId: string): Promise<string[]> {
  const rows = await db
    .select({ id: membershipInstalls.install_id })
    .from(membershipInstalls)
    .where(and(eq(membershipInstalls.account_id, accountId), eq(membershipInstalls.user_id, userId)));
  return rows.map((r) => r.id);
}

export async function insertInvitation(tx: Db, values: typeof invitations.$inferInsert) {
  await tx.insert(invitations).values(values);
}

/** The invitation of a token hash, locked (single use under concurrency). */
export async function lockInvitation(tx: Db, tokenHash: string) {
  const [row] = await tx
    .select({
      account_id: invitations.account_id,
      user_id: invitations.user_id,
      expires_at: invitations.expires_at,
      accepted_at: invitations.accepted_at,
    })
    .from(invitations)
    .where(eq(invitations.token_hash, tokenHash))
    .for('update');
  return row ?? null;
}

export async function markAccepted(tx: Db, accountId: string, userId: string, at: Date) {
  await tx
    .update(invitations)
    .set({ accepted_at: at })
    .where(
      and(
        eq(invitations.account_id, accountId),
        eq(invitations.user_id, userId),
        isNull(invitations.accepted_at),
      ),
    );
  await tx.update(users).set({ invite_accepted: true }).where(eq(users.id, userId));
}

export async function hasCredential(db: Db, userId: string): Promise<boolean> {
  const [row] = await db
    .select({ id: credentials.id })
    .from(credentials)
    .where(eq(credentials.user_id, userId))
    .limit(1);
  return Boolean(row);
}
