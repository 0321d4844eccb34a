import { and, eq, lte, or, sql } from 'drizzle-orm';
import { type Db, preparedRows, queryRows, type RowOf } from '../../db/client.js';
import { idempotencyKeys } from '../../db/schema.js';

// Issue 22: the claims and stored responses of Idempotency-Key. Every statement runs on its own
// (autocommit): a claim is committed before the route runs, so another process sees it at once.

const projection = {
  fingerprint: idempotencyKeys.fingerprint,
  status: idempotencyKeys.status,
  token: idempotencyKeys.token,
  locked_at: idempotencyKeys.locked_at,
  response_status: idempotencyKeys.response_status,
  response_headers: idempotencyKeys.response_headers,
  response_body: idempotencyKeys.response_body,
  expires_at: idempotencyKeys.expires_at,
};
export type IdempotencyRow = RowOf<typeof projection>;

const rowOf = (scope: string, key: string) =>
  and(eq(idempotencyKeys.scope, scope), eq(idempotencyKeys.key, key));

export interface ClaimValues {
  scope: string;
  key: string;
  fingerprint: string;
  token: string;
  now: Date;
  expiresAt: Date;
}

/** A new claim (status running); false when the key already has a row (INSERT ... ON CONFLICT DO NOTHING). */
const INSERT_CLAIM_SQL = `insert into idempotency_keys
  (scope, key, fingerprint, status, token, locked_at, created_at, expires_at)
  values ($1, $2, $3, 'running', $4, $5, $5, $6)
  on conflict do nothing returning token`;

export async function insertClaim(db: Db, v: ClaimValues): Promise<boolean> {
  // PostgreSQL: prepared once per connection (this runs before every keyed request; bench/README.md).
  const prepared = await preparedRows<{ token: string }>(db, 'hp_idempotency_claim', INSERT_CLAIM_SQL, [
    v.scope,
    v.key,
    v.fingerprint,
    v.token,
    v.now,
    v.expiresAt,
  ]);
  if (prepared) return prepared.length > 0;
  const rows = await db
    .insert(idempotencyKeys)
    .values({
      scope: v.scope,
      key: v.key,
      fingerprint: v.fingerprint,
      status: 'running',
      token: v.token,
      locked_at: v.now,
      created_at: v.now,
      expires_at: v.expiresAt,
    })
    .onConflictDoNothing()
    .returning({ token: idempotencyKeys.token });
  return rows.length > 0;
}

/**
 * Claims an existing row when it is expired (any request: the key starts afresh) or when it is a
 * claim of the same request whose lock is older than `staleBefore` (its process died: taken over,
 * keeping its expiry). One conditional UPDATE: on PostgreSQL a concurrent claimer blocks on the row
 * and re-checks the condition against the winner's version, so at most one succeeds.
 */
export async function reclaim(db: Db, v: ClaimValues & { staleBefore: Date }): Promise<boolean> {
  const expired = lte(idempotencyKeys.expires_at, v.now);
  const rows = await db
    .update(idempotencyKeys)
    .set({
      fingerprint: v.fingerprint,
      status: 'running',
      token: v.token,
      locked_at: v.now,
      response_status: null,
      response_headers: null,
      response_body: null,
      created_at: sql`case when ${expired} then ${v.now.toISOString()}::timestamptz else ${idempotencyKeys.created_at} end`,
      expires_at: sql`case when ${expired} then ${v.expiresAt.toISOString()}::timestamptz else ${idempotencyKeys.expires_at} end`,
    })
    .where(
      and(
        rowOf(v.scope, v.key),
        or(
          expired,
          and(
            eq(idempotencyKeys.status, 'running'),
            lte(idempotencyKeys.locked_at, v.staleBefore),
            eq(idempotencyKeys.fingerprint, v.fingerprint),
          ),
        ),
      ),
    )
    .returning({ token: idempotencyKeys.token });
  return rows.length > 0;
}

export async function findKey(db: Db, scope: string, key: string): Promise<IdempotencyRow | null> {
  const [row] = await db.select(projection).from(idempotencyKeys).where(rowOf(scope, key));
  return row ?? null;
}

const STORE_RESPONSE_SQL = `update idempotency_keys
  set status = 'done', locked_at = null, response_status = $4, response_headers = $5::jsonb, response_body = $6
  where scope = $1 and key = $2 and token = $3 and status = 'running'
  returning token`;

/** Stores the response of the claim `token` holds (nothing when the claim was taken over meanwhile). */
export async function storeResponse(
  db: Db,
  scope: string,
  key: string,
  token: string,
  response: { status: number; headers: Record<string, string>; body: string | null },
): Promise<boolean> {
  const prepared = await preparedRows<{ token: string }>(db, 'hp_idempotency_store', STORE_RESPONSE_SQL, [
    scope,
    key,
    token,
    response.status,
    JSON.stringify(response.headers),
    response.body,
  ]);
  if (prepared) return prepared.length > 0;
  const rows = await db
    .update(idempotencyKeys)
    .set({
      status: 'done',
      locked_at: null,
      response_status: response.status,
      response_headers: response.headers,
      response_body: response.body,
    })
    .where(and(rowOf(scope, key), eq(idempotencyKeys.token, token), eq(idempotencyKeys.status, 'running')))
    .returning({ token: idempotencyKeys.token });
  return rows.length > 0;
}

/** Drops the claim `token` holds, so a retry with the key runs (a 5xx, a response that cannot be kept). */
export async function releaseClaim(db: Db, scope: string, key: string, token: string): Promise<void> {
  await db
    .delete(idempotencyKeys)
    .where(and(rowOf(scope, key), eq(idempotencyKeys.token, token), eq(idempotencyKeys.status, 'running')));
}

/** Every stored body with its row (`hostplane reseal`: a bounded table, keys live IDEMPOTENCY_TTL_HOURS). */
export async function storedBodies(db: Db): Promise<{ scope: string; key: string; body: string }[]> {
  return queryRows<{ scope: string; key: string; body: string }>(
    db,
    sql`select scope, key, response_body as body from idempotency_keys where response_body is not null`,
  );
}

/** Replaces a stored body (`hostplane reseal`). */
export async function setBody(db: Db, scope: string, key: string, body: string): Promise<void> {
  await db.update(idempotencyKeys).set({ response_body: body }).where(rowOf(scope, key));
}

/** Deletes up to `limit` expired keys, oldest first; answers how many. */
export async function deleteExpired(db: Db, now: Date, limit: number): Promise<number> {
  const at = now.toISOString();
  // The expiry is checked again on the row itself: a key claimed afresh since the subquery read it
  // (a new expiry) is kept.
  const rows = await queryRows<{ key: string }>(
    db,
    sql`delete from idempotency_keys
        where (scope, key) in (
          select scope, key from idempotency_keys
          where expires_at <= ${at}::timestamptz order by expires_at limit ${limit})
        and expires_at <= ${at}::timestamptz
        returning key`,
  );
  return rows.length;
}
