import { and, between, eq, inArray, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import {
  installPlacements,
  installs,
  membershipInstalls,
  memberships,
  operations,
  sshKeys,
} from '../../db/schema.js';

/**
 * Issue 31: what a login needs, in one statement: the installs a login can name (by its name, or the
 * id range of its 30 hex digits: one in practice), the key registered with the fingerprint (if any),
 * and that key's user's membership of the install's account with whether its partial scope holds it.
 */
export async function loginFacts(
  db: Db,
  login: { low: string; high: string } | { name: string },
  fingerprint: string | null,
) {
  const which: SQL | undefined =
    'name' in login ? eq(installs.name, login.name) : between(installs.id, login.low, login.high);
  return db
    .select({
      install_id: installs.id,
      install_name: installs.name,
      account_id: installs.account_id,
      status: installs.status,
      key_user_id: sshKeys.user_id,
      public_key: sshKeys.public_key,
      roles: memberships.roles,
      in_scope: sql<boolean>`exists (select 1 from ${membershipInstalls}
        where ${membershipInstalls.account_id} = ${installs.account_id}
          and ${membershipInstalls.user_id} = ${sshKeys.user_id}
          and ${membershipInstalls.install_id} = ${installs.id})`,
      // Issue 30 (decision #211): the install's move makes its final copy; its files take no writes.
      frozen: sql<boolean>`exists (select 1 from ${operations}
        where ${operations.install_id} = ${installs.id} and ${operations.type} = 'move_install'
          and ${operations.status} in ('queued', 'in_progress') and ${operations.state}->>'phase' = 'syncing')`,
    })
    .from(installs)
    .leftJoin(sshKeys, sql`${sshKeys.fingerprint} = ${fingerprint ?? ''}`)
    .leftJoin(
      memberships,
      and(eq(memberships.account_id, installs.account_id), eq(memberships.user_id, sshKeys.user_id)),
    )
    .where(which)
    .limit(2);
}

/** The user a key fingerprint belongs to (a refused login's attribution), or null. */
export async function keyOwner(db: Db, fingerprint: string): Promise<string | null> {
  const [row] = await db
    .select({ user_id: sshKeys.user_id })
    .from(sshKeys)
    .where(eq(sshKeys.fingerprint, fingerprint))
    .limit(1);
  return row?.user_id ?? null;
}

/** Issue 31 (decision 185): the names of the installs with these ids (the logins sshd admits). */
export async function installNames(db: Db, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: installs.id, name: installs.name })
    .from(installs)
    .where(inArray(installs.id, ids));
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** Issue 31 with several servers (decision 200): whether the install is placed on the server now. */
export async function placedOn(db: Db, installId: string, serverId: string): Promise<boolean> {
  const [row] = await db
    .select({ id: installPlacements.install_id })
    .from(installPlacements)
    .where(and(eq(installPlacements.install_id, installId), eq(installPlacements.server_id, serverId)))
    .limit(1);
  return Boolean(row);
}
