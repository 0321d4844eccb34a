import { and, between, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { installs, membershipInstalls, memberships, sshKeys } from '../../db/schema.js';

/**
 * Issue 31: what a login needs, in one statement: the installs a login can name (the id range of its
 * 30 hex digits: one in practice), the key registered with the fingerprint (if any), and that key's
 * user's membership of the install's account with whether its partial scope holds the install.
 */
export async function loginFacts(db: Db, range: { low: string; high: string }, fingerprint: string | null) {
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
    })
    .from(installs)
    .leftJoin(sshKeys, sql`${sshKeys.fingerprint} = ${fingerprint ?? ''}`)
    .leftJoin(
      memberships,
      and(eq(memberships.account_id, installs.account_id), eq(memberships.user_id, sshKeys.user_id)),
    )
    .where(between(installs.id, range.low, range.high))
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
