import { sql } from 'drizzle-orm';
import { type Db, queryRows } from '../../db/client.js';
import { BOSS_SCHEMA } from '../../jobs/queue.js';

// The read-only statements behind the gauges of GET /metrics, run at scrape time (metrics.service.ts).
// Ages come from the database clock, as pg-boss's own start_after does.

export interface QueueStat {
  queue: string;
  /** Ready to run: created or retrying, start time reached. */
  waiting: number;
  active: number;
  /** Created or retrying with a later start (a retry back-off, a scheduled job). */
  deferred: number;
  /** How long the oldest ready job has been ready (0 when none is). */
  oldest_seconds: number;
}

/** Unfinished pg-boss jobs per queue (finished ones are never read). */
export function queueStats(db: Db): Promise<QueueStat[]> {
  return queryRows<QueueStat>(
    db,
    sql`select name as queue,
          (count(*) filter (where state in ('created', 'retry') and start_after <= now()))::int as waiting,
          (count(*) filter (where state = 'active'))::int as active,
          (count(*) filter (where state in ('created', 'retry') and start_after > now()))::int as deferred,
          coalesce(extract(epoch from now() - min(start_after)
            filter (where state in ('created', 'retry') and start_after <= now())), 0)::float8 as oldest_seconds
        from ${sql.raw(BOSS_SCHEMA)}.job
        where state in ('created', 'retry', 'active')
        group by name`,
  );
}

export interface OperationCount {
  type: string;
  status: string;
  n: number;
}

/** Operations by type and status (a scan of the table: see docs/decisions.md). */
export function operationCounts(db: Db): Promise<OperationCount[]> {
  return queryRows<OperationCount>(
    db,
    sql`select type, status, count(*)::int as n from operations group by type, status`,
  );
}

export interface OutboxBacklog {
  pending: number;
  oldest_seconds: number;
}

/** Mail not yet handed to SMTP (or kept): how many, and the age of the oldest. */
export async function outboxBacklog(db: Db): Promise<OutboxBacklog> {
  const [row] = await queryRows<OutboxBacklog>(
    db,
    sql`select count(*)::int as pending,
          greatest(0, coalesce(extract(epoch from now() - min(created_at)), 0))::float8 as oldest_seconds
        from mail_outbox where status = 'pending'`,
  );
  return row ?? { pending: 0, oldest_seconds: 0 };
}

export interface AuditBacklog {
  unfinished: number;
  oldest_seconds: number;
}

/**
 * Issue 22: audit events whose call never answered (status null, older than a minute: the process
 * ended mid-call), and the age of the oldest event (the 13-month sweep keeps it under ~396 days).
 * Both use the occurred_at index.
 */
export async function auditBacklog(db: Db): Promise<AuditBacklog> {
  const [row] = await queryRows<AuditBacklog>(
    db,
    sql`select (select count(*)::int from audit_events
                 where status is null and occurred_at < now() - interval '1 minute') as unfinished,
          greatest(0, coalesce(extract(epoch from now() - (select min(occurred_at) from audit_events)), 0))::float8
            as oldest_seconds`,
  );
  return row ?? { unfinished: 0, oldest_seconds: 0 };
}

export interface WebhookBacklog {
  /** Deliveries and their attempts so far, by status (pending, delivered, failed). */
  by_status: { status: string; deliveries: number; attempts: number }[];
  oldest_pending_seconds: number;
  disabled_endpoints: number;
}

/** Issue 22: the webhook queue (deliveries by status, the oldest pending one) and disabled endpoints. */
export async function webhookBacklog(db: Db): Promise<WebhookBacklog> {
  const byStatus = await queryRows<{ status: string; deliveries: number; attempts: number }>(
    db,
    sql`select status, count(*)::int as deliveries, coalesce(sum(attempts), 0)::int as attempts
        from webhook_deliveries group by status`,
  );
  const [row] = await queryRows<{ oldest_pending_seconds: number; disabled_endpoints: number }>(
    db,
    sql`select
          (select greatest(0, coalesce(extract(epoch from now() - min(created_at)), 0))::float8
             from webhook_deliveries where status = 'pending') as oldest_pending_seconds,
          (select count(*)::int from webhook_endpoints where not enabled) as disabled_endpoints`,
  );
  return {
    by_status: byStatus,
    oldest_pending_seconds: Number(row?.oldest_pending_seconds ?? 0),
    disabled_endpoints: row?.disabled_endpoints ?? 0,
  };
}
