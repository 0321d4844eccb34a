import { and, desc, eq, gte, inArray, lt, type SQL } from 'drizzle-orm';
import type { Db, RowOf } from '../../db/client.js';
import { type Page, selectPage } from '../../db/page.js';
import {
  accounts,
  auditEvents,
  domains,
  installs,
  siteReportSchedules,
  sites,
  users,
} from '../../db/schema.js';

const projection = {
  id: auditEvents.id,
  occurred_at: auditEvents.occurred_at,
  account_id: auditEvents.account_id,
  actor_type: auditEvents.actor_type,
  actor_user_id: auditEvents.actor_user_id,
  credential_id: auditEvents.credential_id,
  ip: auditEvents.ip,
  request_id: auditEvents.request_id,
  operation_id: auditEvents.operation_id,
  action: auditEvents.action,
  method: auditEvents.method,
  path: auditEvents.path,
  resource_type: auditEvents.resource_type,
  resource_id: auditEvents.resource_id,
  status: auditEvents.status,
  before: auditEvents.before,
  after: auditEvents.after,
};
export type AuditEventRow = RowOf<typeof projection>;

export async function insertEvent(db: Db, values: typeof auditEvents.$inferInsert): Promise<string> {
  const [row] = await db.insert(auditEvents).values(values).returning({ id: auditEvents.id });
  if (!row) throw new Error('insert returned no row');
  return row.id;
}

export async function completeEvent(
  db: Db,
  id: string,
  values: Partial<
    Pick<
      typeof auditEvents.$inferInsert,
      'status' | 'before' | 'after' | 'operation_id' | 'resource_id' | 'account_id'
    >
  >,
) {
  await db.update(auditEvents).set(values).where(eq(auditEvents.id, id));
}

export async function deleteEvent(db: Db, id: string) {
  await db.delete(auditEvents).where(eq(auditEvents.id, id));
}

/** Deletes up to `batch` events older than `before`; answers how many. */
export async function deleteOlderThan(db: Db, before: Date, batch: number): Promise<number> {
  const old = db
    .select({ id: auditEvents.id })
    .from(auditEvents)
    .where(lt(auditEvents.occurred_at, before))
    .limit(batch);
  const rows = await db
    .delete(auditEvents)
    .where(inArray(auditEvents.id, old))
    .returning({ id: auditEvents.id });
  return rows.length;
}

export interface EventFilter {
  accountId: string;
  actorUserId?: string;
  credentialId?: string;
  resourceType?: string;
  resourceId?: string;
  action?: string;
  since?: Date;
  until?: Date;
}

export function listEvents(db: Db, filter: EventFilter, page: Page) {
  const parts: SQL[] = [eq(auditEvents.account_id, filter.accountId)];
  if (filter.actorUserId) parts.push(eq(auditEvents.actor_user_id, filter.actorUserId));
  if (filter.credentialId) parts.push(eq(auditEvents.credential_id, filter.credentialId));
  if (filter.resourceType) parts.push(eq(auditEvents.resource_type, filter.resourceType));
  if (filter.resourceId) parts.push(eq(auditEvents.resource_id, filter.resourceId));
  if (filter.action) parts.push(eq(auditEvents.action, filter.action));
  if (filter.since) parts.push(gte(auditEvents.occurred_at, filter.since));
  if (filter.until) parts.push(lt(auditEvents.occurred_at, filter.until));
  const where = and(...parts);
  return selectPage(
    db.select(projection).from(auditEvents).where(where).$dynamic(),
    db.$count(auditEvents, where),
    [desc(auditEvents.occurred_at), desc(auditEvents.id)],
    page,
  );
}

/** The account of an install, a site or a site report schedule (null when there is none). */
export async function accountOf(
  db: Db,
  kind: 'install' | 'site' | 'schedule',
  id: string,
): Promise<string | null> {
  if (kind === 'schedule') {
    const [row] = await db
      .select({ account_id: sites.account_id })
      .from(siteReportSchedules)
      .innerJoin(sites, eq(sites.id, siteReportSchedules.site_id))
      .where(eq(siteReportSchedules.id, id));
    return row?.account_id ?? null;
  }
  const table = kind === 'install' ? installs : sites;
  const [row] = await db.select({ account_id: table.account_id }).from(table).where(eq(table.id, id));
  return row?.account_id ?? null;
}

const SNAPSHOT = ['account', 'site', 'install', 'domain', 'user'];

/** Whether the log keeps the fields of this resource type before and after a change. */
export function snapshots(resourceType: string): boolean {
  return SNAPSHOT.includes(resourceType);
}

/** The row of a resource as JSON (the service leaves out secrets), or null. */
export async function snapshot(
  db: Db,
  resourceType: string,
  id: string,
): Promise<Record<string, unknown> | null> {
  let rows: Record<string, unknown>[];
  switch (resourceType) {
    case 'account':
      rows = await db.select().from(accounts).where(eq(accounts.id, id));
      break;
    case 'site':
      rows = await db.select().from(sites).where(eq(sites.id, id));
      break;
    case 'install':
      rows = await db.select().from(installs).where(eq(installs.id, id));
      break;
    case 'domain':
      rows = await db.select().from(domains).where(eq(domains.id, id));
      break;
    case 'user':
      rows = await db.select().from(users).where(eq(users.id, id));
      break;
    default:
      return null;
  }
  return rows[0] ?? null;
}
