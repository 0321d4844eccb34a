import { and, eq, isNull, sql } from 'drizzle-orm';
import { type Db, preparedRows, queryRows } from '../db/client.js';
import {
  accountDataVersions,
  apiCredentials,
  authEpoch,
  credentials,
  membershipInstalls,
  memberships,
} from '../db/schema.js';

export function findCredential(db: Db, username: string) {
  return db
    .select({ user_id: credentials.user_id, password_hash: credentials.password_hash })
    .from(credentials)
    .where(eq(credentials.username, username))
    .limit(1)
    .then((rows) => rows[0] ?? null);
}

export async function loadMemberships(db: Db, userId: string) {
  const [rows, scoped] = [
    await db
      .select({ account_id: memberships.account_id, roles: memberships.roles })
      .from(memberships)
      .where(eq(memberships.user_id, userId)),
    await db
      .select({ account_id: membershipInstalls.account_id, install_id: membershipInstalls.install_id })
      .from(membershipInstalls)
      .where(eq(membershipInstalls.user_id, userId)),
  ];
  return { rows, scoped };
}

/** The membership epoch (0 before the first change): see authenticator.ts. */
export async function readEpoch(db: Db): Promise<number> {
  const [row] = await db.select({ epoch: authEpoch.epoch }).from(authEpoch).where(eq(authEpoch.id, 1));
  return Number(row?.epoch ?? 0);
}

/** Bumps the membership epoch inside the transaction that changes memberships or credentials. */
export async function bumpEpoch(tx: Db): Promise<void> {
  await tx
    .insert(authEpoch)
    .values({ id: 1, epoch: 1 })
    .onConflictDoUpdate({ target: authEpoch.id, set: { epoch: sql`${authEpoch.epoch} + 1` } });
}

/** readFreshness's statement on PostgreSQL (the Drizzle form below is the same text). */
const FRESHNESS_SQL = `select (select "epoch" from "auth_epoch" where "id" = 1) as epoch,
  (select string_agg("account_id"::text || ':' || "version", ',' order by "account_id")
   from "account_data_versions" where "account_id" = any($1::uuid[])) as versions`;

/**
 * Issue 14, the read cache's one lookup: the membership epoch and the data versions of the given
 * accounts (primary-key probes), as one string `epoch|id:version,...` (accounts in id order).
 */
export async function readFreshness(
  db: Db,
  accountIds: string[],
): Promise<{ epoch: number; versions: string }> {
  type Row = { epoch: number | string | null; versions: string | null };
  // PostgreSQL: the same statement, prepared once per connection (it runs for every batch of reads).
  const prepared = await preparedRows<Row>(db, 'hp_read_freshness', FRESHNESS_SQL, [accountIds]);
  const [row] =
    prepared ??
    (await queryRows<{ epoch: number | string | null; versions: string | null }>(
      db,
      sql`select (select ${authEpoch.epoch} from ${authEpoch} where ${authEpoch.id} = 1) as epoch,
      (select string_agg(${accountDataVersions.account_id}::text || ':' || ${accountDataVersions.version}, ','
        order by ${accountDataVersions.account_id})
       from ${accountDataVersions}
       where ${accountDataVersions.account_id} = any(${sql.param(accountIds)}::uuid[])) as versions`,
    ));
  return { epoch: Number(row?.epoch ?? 0), versions: row?.versions ?? '' };
}

/** Issue 22: a scoped credential that is not revoked (expiry is checked by the caller's clock). */
export function findScopedCredential(db: Db, id: string) {
  return db
    .select({
      id: apiCredentials.id,
      account_id: apiCredentials.account_id,
      user_id: apiCredentials.user_id,
      scope: apiCredentials.scope,
      install_ids: apiCredentials.install_ids,
      allowed_cidrs: apiCredentials.allowed_cidrs,
      secret_hash: apiCredentials.secret_hash,
      expires_at: apiCredentials.expires_at,
    })
    .from(apiCredentials)
    .where(and(eq(apiCredentials.id, id), isNull(apiCredentials.revoked_at)))
    .limit(1)
    .then((rows) => rows[0] ?? null);
}

/** Issue 22, write-behind: the last use of each credential in one statement (never moves back). */
export async function touchScopedCredentials(db: Db, uses: { id: string; at: Date; ip: string | null }[]) {
  if (uses.length === 0) return;
  const values = sql.join(
    uses.map((u) => sql`(${u.id}::uuid, ${u.at.toISOString()}::timestamptz, ${u.ip}::text)`),
    sql`, `,
  );
  await db.execute(sql`update ${apiCredentials} set last_used_at = v.at, last_used_ip = v.ip
    from (values ${values}) as v(id, at, ip)
    where ${apiCredentials.id} = v.id and (${apiCredentials.last_used_at} is null or ${apiCredentials.last_used_at} < v.at)`);
}
