import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { Errors } from '../../errors.js';
import type { JobQueue } from '../../jobs/queue.js';
import * as repo from './events.repo.js';
import * as hooks from './webhooks.repo.js';

export type { EventRow } from './events.repo.js';

/** Every type of event (issue 22), the list's `type` filter and the endpoints' filter take these. */
export const EVENT_TYPES = [
  'backup.started',
  'backup.completed',
  'backup.failed',
  'restore.started',
  'restore.completed',
  'restore.failed',
  'install_copy.started',
  'install_copy.completed',
  'install_copy.failed',
  'install.provisioned',
  'install.provision_failed',
  'install.deleted',
  'site_transfer.started',
  'site_transfer.completed',
  'site_transfer.failed',
  'domain.verified',
  'domain.verification_failed',
  'certificate.issued',
  'certificate.expiring',
  'disk_usage.refreshed',
  'site_report.sent',
  'user.invited',
  'user.removed',
  'operation.completed',
  'operation.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Events are listed, and kept, for this long. */
export const EVENT_RETENTION_DAYS = 30;
const DAY_MS = 86_400_000;

export interface NewEvent {
  account_id: string;
  /** The install the change is about (deliveries are ordered per install); null for account-level ones. */
  install_id: string | null;
  type: EventType;
  resource: { type: string; id: string };
  data: Record<string, unknown>;
}

/** The event as it is listed and delivered (the webhook body). */
export function toEvent(row: repo.EventRow) {
  return {
    id: row.id,
    type: row.type,
    created_at: row.created_at.toISOString(),
    account_id: row.account_id,
    install_id: row.install_id,
    resource: { type: row.resource_type, id: row.resource_id },
    data: row.data,
  };
}

/** A delivery's lane: deliveries of one endpoint and lane go out in event order. */
export const laneOf = (installId: string | null) => (installId ? `install:${installId}` : 'account');

export interface EventsDeps {
  db: Db;
  clock: Clock;
  queue: Pick<JobQueue, 'enqueue'>;
}

/**
 * Issue 22: the events of an account. `record` writes one in the caller's transaction (the one that
 * changes the state), with a delivery row and its job for every enabled endpoint that takes its
 * type: the change, its event and its deliveries commit together or not at all.
 */
export function createEventsService({ db, clock, queue }: EventsDeps) {
  let lastSweep = Number.NEGATIVE_INFINITY;

  async function record(tx: Db, event: NewEvent) {
    const row = await repo.insertEvent(tx, {
      account_id: event.account_id,
      install_id: event.install_id,
      type: event.type,
      resource_type: event.resource.type,
      resource_id: event.resource.id,
      data: event.data,
      created_at: clock.now(),
    });
    const endpoints = await hooks.endpointsFor(tx, event.account_id, event.type);
    if (endpoints.length > 0) {
      const payload = JSON.stringify(toEvent(row));
      const ids = await hooks.insertDeliveries(
        tx,
        endpoints.map((e) => ({
          endpoint_id: e.id,
          account_id: event.account_id,
          event_id: row.id,
          event_type: row.type,
          lane: laneOf(row.install_id),
          payload,
          status: 'pending' as const,
          created_at: row.created_at,
        })),
      );
      for (const id of ids) await queue.enqueue(tx, 'webhook-deliver', { delivery_id: id });
    }
    return row;
  }

  return {
    record,

    /** GET /v1/accounts/{id}/events: newest first, 30 days, after the `starting_after` cursor. */
    async list(
      caller: Caller,
      accountId: string,
      q: {
        limit: number;
        starting_after?: string;
        type?: string[];
        resource_id?: string;
        install_id?: string;
      },
    ) {
      const membership = requireAccount(caller, accountId, 'account:read');
      let beforeSeq: number | undefined;
      if (q.starting_after) {
        const seq = await repo.seqOf(db, accountId, q.starting_after);
        if (seq === null)
          throw Errors.invalidValue(
            'event',
            'starting_after',
            'No event of this account has this id',
            'not_found',
          );
        beforeSeq = seq;
      }
      const rows = await repo.listEvents(db, {
        accountId,
        since: new Date(clock.now().getTime() - EVENT_RETENTION_DAYS * DAY_MS),
        ...(beforeSeq !== undefined && { beforeSeq }),
        ...(q.type && { types: q.type }),
        ...(q.resource_id && { resourceId: q.resource_id }),
        ...(q.install_id && { installId: q.install_id }),
        visibleInstalls: membership.installIds ? [...membership.installIds] : null,
        limit: q.limit,
      });
      return { rows: rows.slice(0, q.limit), hasMore: rows.length > q.limit };
    },

    /**
     * Due work of the worker's sweeper: deletes events (and finished deliveries) older than 30 days,
     * at most once a minute, in batches.
     */
    async sweep(force = false) {
      const now = clock.now();
      if (!force && now.getTime() - lastSweep < 60_000) return 0;
      lastSweep = now.getTime();
      const before = new Date(now.getTime() - EVENT_RETENTION_DAYS * DAY_MS);
      let total = 0;
      for (;;) {
        const n =
          (await repo.deleteOlderThan(db, before, 1000)) +
          (await hooks.deleteFinishedBefore(db, before, 1000));
        total += n;
        if (n === 0) return total;
      }
    },
  };
}

export type EventsService = ReturnType<typeof createEventsService>;
/** What services that record events are given. */
export type EventRecorder = Pick<EventsService, 'record'>;
