import { and, asc, desc, eq, gt, inArray, lt, lte, sql } from 'drizzle-orm';
import { type Db, queryRows, type RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import { memberships, users, webhookAttempts, webhookDeliveries, webhookEndpoints } from '../../db/schema.js';

const endpointProjection = {
  id: webhookEndpoints.id,
  account_id: webhookEndpoints.account_id,
  url: webhookEndpoints.url,
  description: webhookEndpoints.description,
  event_types: webhookEndpoints.event_types,
  enabled: webhookEndpoints.enabled,
  secret: webhookEndpoints.secret,
  previous_secret: webhookEndpoints.previous_secret,
  previous_secret_expires_at: webhookEndpoints.previous_secret_expires_at,
  failing_since: webhookEndpoints.failing_since,
  disabled_reason: webhookEndpoints.disabled_reason,
  created_at: webhookEndpoints.created_at,
  updated_at: webhookEndpoints.updated_at,
};
export type EndpointRow = RowOf<typeof endpointProjection>;

export async function insertEndpoint(db: Db, values: typeof webhookEndpoints.$inferInsert) {
  const [row] = await db.insert(webhookEndpoints).values(values).returning(endpointProjection);
  if (!row) throw new Error('insert into webhook_endpoints returned no row');
  return row;
}

export async function findEndpoint(db: Db, accountId: string, id: string): Promise<EndpointRow | null> {
  const [row] = await db
    .select(endpointProjection)
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.account_id, accountId)));
  return row ?? null;
}

export async function findEndpointById(db: Db, id: string, lock = false): Promise<EndpointRow | null> {
  const q = db.select(endpointProjection).from(webhookEndpoints).where(eq(webhookEndpoints.id, id));
  const [row] = lock ? await q.for('update') : await q;
  return row ?? null;
}

export function listEndpoints(db: Db, accountId: string, page: Page) {
  const where = eq(webhookEndpoints.account_id, accountId);
  return selectPage(
    db.select(endpointProjection).from(webhookEndpoints).where(where).$dynamic(),
    db.$count(webhookEndpoints, where),
    [asc(webhookEndpoints.created_at), asc(webhookEndpoints.id)],
    page,
  );
}

export async function updateEndpoint(
  db: Db,
  id: string,
  values: Partial<typeof webhookEndpoints.$inferInsert>,
): Promise<EndpointRow | null> {
  const [row] = await db
    .update(webhookEndpoints)
    .set(values)
    .where(eq(webhookEndpoints.id, id))
    .returning(endpointProjection);
  return row ?? null;
}

export async function deleteEndpoint(db: Db, accountId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.account_id, accountId)))
    .returning({ id: webhookEndpoints.id });
  return rows.length > 0;
}

/** The enabled endpoints of an account that take events of `type` (an empty filter takes all). */
export function endpointsFor(tx: Db, accountId: string, type: string): Promise<{ id: string }[]> {
  return queryRows<{ id: string }>(
    tx,
    sql`select id from webhook_endpoints
        where account_id = ${accountId} and enabled
          and (jsonb_array_length(event_types) = 0 or event_types ? ${type})`,
  );
}

/** The addresses of the account's owners (mailed when an endpoint is disabled). */
export async function ownerEmails(db: Db, accountId: string): Promise<string[]> {
  const rows = await db
    .select({ email: users.email })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.user_id))
    .where(and(eq(memberships.account_id, accountId), eq(memberships.roles, 'owner')));
  return rows.map((r) => r.email).filter((e): e is string => typeof e === 'string' && e.length > 0);
}

const deliveryProjection = {
  id: webhookDeliveries.id,
  seq: webhookDeliveries.seq,
  endpoint_id: webhookDeliveries.endpoint_id,
  account_id: webhookDeliveries.account_id,
  event_id: webhookDeliveries.event_id,
  event_type: webhookDeliveries.event_type,
  lane: webhookDeliveries.lane,
  payload: webhookDeliveries.payload,
  status: webhookDeliveries.status,
  attempts: webhookDeliveries.attempts,
  next_attempt_at: webhookDeliveries.next_attempt_at,
  last_attempt_at: webhookDeliveries.last_attempt_at,
  last_status_code: webhookDeliveries.last_status_code,
  last_latency_ms: webhookDeliveries.last_latency_ms,
  last_error: webhookDeliveries.last_error,
  last_response: webhookDeliveries.last_response,
  delivered_at: webhookDeliveries.delivered_at,
  created_at: webhookDeliveries.created_at,
};
export type DeliveryRow = RowOf<typeof deliveryProjection>;

/** New deliveries; an endpoint that already has the event keeps its one (ids of the new ones). */
export async function insertDeliveries(
  tx: Db,
  values: (typeof webhookDeliveries.$inferInsert)[],
): Promise<string[]> {
  if (values.length === 0) return [];
  const rows = await tx
    .insert(webhookDeliveries)
    .values(values)
    .onConflictDoNothing()
    .returning({ id: webhookDeliveries.id });
  return rows.map((r) => r.id);
}

export async function findDelivery(db: Db, id: string, lock = false): Promise<DeliveryRow | null> {
  const q = db.select(deliveryProjection).from(webhookDeliveries).where(eq(webhookDeliveries.id, id));
  const [row] = lock ? await q.for('update') : await q;
  return row ?? null;
}

export async function findEndpointDelivery(db: Db, endpointId: string, id: string) {
  const [row] = await db
    .select(deliveryProjection)
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.endpoint_id, endpointId)));
  return row ?? null;
}

/**
 * The oldest pending delivery of the lane before `seq` (`before`: null means this one is next) or
 * after it (`after`: the one to queue when this one ends).
 */
export async function pendingInLane(
  db: Db,
  d: Pick<DeliveryRow, 'endpoint_id' | 'lane' | 'seq'>,
  direction: 'before' | 'after',
) {
  const [row] = await db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.endpoint_id, d.endpoint_id),
        eq(webhookDeliveries.lane, d.lane),
        eq(webhookDeliveries.status, 'pending'),
        (direction === 'before' ? lt : gt)(webhookDeliveries.seq, d.seq),
      ),
    )
    .orderBy(asc(webhookDeliveries.seq))
    .limit(1);
  return row ?? null;
}

export async function updateDelivery(
  db: Db,
  id: string,
  values: Partial<typeof webhookDeliveries.$inferInsert>,
): Promise<DeliveryRow | null> {
  const [row] = await db
    .update(webhookDeliveries)
    .set(values)
    .where(eq(webhookDeliveries.id, id))
    .returning(deliveryProjection);
  return row ?? null;
}

const attemptProjection = {
  delivery_id: webhookAttempts.delivery_id,
  attempt: webhookAttempts.attempt,
  started_at: webhookAttempts.started_at,
  status_code: webhookAttempts.status_code,
  error_kind: webhookAttempts.error_kind,
  error: webhookAttempts.error,
  latency_ms: webhookAttempts.latency_ms,
  response_excerpt: webhookAttempts.response_excerpt,
};
export type AttemptRow = RowOf<typeof attemptProjection>;

/**
 * One attempt of a delivery, in the transaction that records it; attempts older than the latest
 * `keep` of the delivery are deleted (a delivery redelivered again and again stays bounded).
 */
export async function insertAttempt(tx: Db, values: typeof webhookAttempts.$inferInsert, keep: number) {
  await tx.insert(webhookAttempts).values(values).onConflictDoNothing();
  await tx
    .delete(webhookAttempts)
    .where(
      and(
        eq(webhookAttempts.delivery_id, values.delivery_id),
        lte(webhookAttempts.attempt, values.attempt - keep),
      ),
    );
}

/** The latest `limit` attempts of each delivery, oldest first per delivery. */
export async function attemptsOf(db: Db, deliveryIds: string[], limit: number): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  const ranked = db
    .select({
      ...attemptProjection,
      rank: sql<number>`row_number() over (partition by ${webhookAttempts.delivery_id} order by ${webhookAttempts.attempt} desc)`.as(
        'rank',
      ),
    })
    .from(webhookAttempts)
    .where(inArray(webhookAttempts.delivery_id, deliveryIds))
    .as('ranked');
  return db
    .select({
      delivery_id: ranked.delivery_id,
      attempt: ranked.attempt,
      started_at: ranked.started_at,
      status_code: ranked.status_code,
      error_kind: ranked.error_kind,
      error: ranked.error,
      latency_ms: ranked.latency_ms,
      response_excerpt: ranked.response_excerpt,
    })
    .from(ranked)
    .where(lte(ranked.rank, limit))
    .orderBy(asc(ranked.delivery_id), asc(ranked.attempt));
}

export function listDeliveries(db: Db, endpointId: string, page: Page) {
  const where = eq(webhookDeliveries.endpoint_id, endpointId);
  return selectPage(
    db.select(deliveryProjection).from(webhookDeliveries).where(where).$dynamic(),
    db.$count(webhookDeliveries, where),
    [desc(webhookDeliveries.seq)],
    page,
  );
}

/** Deletes up to `batch` finished deliveries created before `before`. */
export async function deleteFinishedBefore(db: Db, before: Date, batch: number): Promise<number> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`delete from webhook_deliveries where id in
          (select id from webhook_deliveries where status <> 'pending' and created_at < ${before}
           order by created_at limit ${batch})
        returning id`,
  );
  return rows.length;
}

/** Sealed secrets in id order after `after` (hostplane reseal). */
export function sealedSecrets(db: Db, after: string | null, limit: number) {
  return db
    .select({
      id: webhookEndpoints.id,
      secret: webhookEndpoints.secret,
      previous_secret: webhookEndpoints.previous_secret,
    })
    .from(webhookEndpoints)
    .where(after ? gt(webhookEndpoints.id, after) : undefined)
    .orderBy(asc(webhookEndpoints.id))
    .limit(limit);
}
