import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import type { AuditBegun, AuditFinish, AuditStart } from '../../http/audit.js';
import * as repo from './audit.repo.js';

export type { AuditEventRow, EventFilter } from './audit.repo.js';

/** Issue 22: events are kept 13 months (about 396 days). */
export const AUDIT_RETENTION_DAYS = 396;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Field names whose values are never recorded (secrets and keys). */
const SECRET = /password|secret|private_key|token|hash|signature|^key$|credential_key|api_key/i;
const MAX_TEXT = 2000;

/** A JSON value with every secret field replaced and long strings cut. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6) return '[…]';
  if (Array.isArray(value)) return value.slice(0, 100).map((v) => redact(v, depth + 1));
  if (value instanceof Date) return value.toISOString();
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out[k] = SECRET.test(k) ? '[redacted]' : redact(v, depth + 1);
    }
    return out;
  }
  if (typeof value === 'string' && value.length > MAX_TEXT) return `${value.slice(0, MAX_TEXT)}…`;
  return value ?? null;
}

const asObject = (value: unknown): Record<string, unknown> | null =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;

const idIn = (value: unknown): string | null =>
  typeof value === 'string' && UUID.test(value) ? value : null;

/** Only the fields that differ, before and after. */
function changed(before: Record<string, unknown>, after: Record<string, unknown>) {
  const b: Record<string, unknown> = {};
  const a: Record<string, unknown> = {};
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
      b[key] = before[key] ?? null;
      a[key] = after[key] ?? null;
    }
  }
  return { before: b, after: a };
}

export interface AuditStats {
  sweptTotal: number;
}

/**
 * Issue 22: the audit log (http/audit.ts records every mutating call through it). The account of
 * a call is found from its path or body (an install's or a site's account when that is what it
 * names); PATCH, PUT and DELETE of accounts, sites, installs, domains and users keep the changed
 * fields before and after (secrets never). Events older than 13 months are swept, a batch at most
 * once an hour, by whichever process records one.
 */
export function createAuditService({
  db,
  clock,
  sweepEveryMs = 3_600_000,
  sweepBatch = 1000,
}: {
  db: Db;
  clock: Clock;
  sweepEveryMs?: number;
  sweepBatch?: number;
}) {
  let lastSweep = Number.NEGATIVE_INFINITY;
  const stats: AuditStats = { sweptTotal: 0 };

  const cutoff = () => new Date(clock.now().getTime() - AUDIT_RETENTION_DAYS * 86_400_000);

  async function sweep(): Promise<number> {
    const removed = await repo.deleteOlderThan(db, cutoff(), sweepBatch);
    stats.sweptTotal += removed;
    return removed;
  }

  async function accountOf(entry: AuditStart): Promise<string | null> {
    const body = asObject(entry.body) ?? {};
    const direct = idIn(entry.params.account_id) ?? idIn(body.account_id);
    if (direct) return direct;
    for (const [kind, id] of [
      ['install', entry.params.install_id],
      ['site', entry.params.site_id],
      ['schedule', entry.params.schedule_id],
      ['install', body.install_id],
      ['install', body.source_install_id],
      ['site', body.site_id],
    ] as const) {
      const checked = idIn(id);
      if (checked) {
        const found = await repo.accountOf(db, kind, checked);
        if (found) return found;
      }
    }
    return null;
  }

  /** The id the path names last (the resource acted on), if any. */
  function resourceIdOf(entry: AuditStart): string | null {
    const values = Object.values(entry.params);
    return values.length > 0 ? String(values[values.length - 1]) : null;
  }

  async function snapshotOf(entry: AuditStart, id: string | null) {
    if (!id || !repo.snapshots(entry.resourceType) || !idIn(id)) return null;
    return asObject(redact(await repo.snapshot(db, entry.resourceType, id)));
  }

  return {
    async begin(entry: AuditStart): Promise<AuditBegun> {
      const now = clock.now();
      if (now.getTime() - lastSweep >= sweepEveryMs) {
        lastSweep = now.getTime();
        // Housekeeping: a failed sweep must not fail the call (the next hour retries).
        await sweep().catch(() => 0);
      }
      const resourceId = resourceIdOf(entry);
      const before = entry.method === 'POST' ? null : await snapshotOf(entry, resourceId);
      const id = await repo.insertEvent(db, {
        occurred_at: now,
        account_id: await accountOf(entry),
        actor_type: entry.actor.type,
        actor_user_id: entry.actor.userId,
        credential_id: entry.actor.credentialId,
        ip: entry.ip,
        request_id: entry.requestId,
        action: entry.action,
        method: entry.method,
        path: entry.path,
        resource_type: entry.resourceType,
        resource_id: resourceId,
        before,
        after: entry.method === 'DELETE' ? null : asObject(redact(entry.body)),
      });
      return { id, before };
    },

    async finish(begun: AuditBegun, entry: AuditStart, outcome: AuditFinish) {
      const response = asObject(outcome.response);
      const operationId =
        idIn(/\/operations\/([0-9a-f-]{36})/i.exec(outcome.location ?? '')?.[1]) ??
        idIn(response?.operation_id) ??
        (outcome.status === 202 ? idIn(response?.id) : null);
      const resourceId =
        entry.method === 'POST'
          ? (idIn(response?.id) ?? idIn(response?.uuid) ?? resourceIdOf(entry))
          : resourceIdOf(entry);
      const values: Parameters<typeof repo.completeEvent>[2] = {
        status: outcome.status,
        operation_id: operationId,
        resource_id: resourceId,
      };
      if (entry.method === 'POST') {
        values.after = response ? asObject(redact(response)) : asObject(redact(entry.body));
        if (entry.resourceType === 'account' && entry.path.endsWith('/accounts'))
          values.account_id = idIn(response?.id);
      } else if (entry.method !== 'DELETE') {
        const after = await snapshotOf(entry, resourceId);
        if (after && begun.before) {
          const diff = changed(begun.before, after);
          values.before = diff.before;
          values.after = diff.after;
        }
      }
      await repo.completeEvent(db, begun.id, values);
    },

    discard: (id: string) => repo.deleteEvent(db, id),

    /** Issue 31: an event that is not an HTTP call (an SSH login, modules/ssh-access), written whole. */
    record: (values: Parameters<typeof repo.insertEvent>[1]) => repo.insertEvent(db, values),

    list(caller: Caller, filter: repo.EventFilter, page: Page) {
      requireAccount(caller, filter.accountId, 'audit:read');
      return repo.listEvents(db, filter, page);
    },

    sweep,
    stats: (): AuditStats => ({ ...stats }),
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
