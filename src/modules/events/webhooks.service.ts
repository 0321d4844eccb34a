import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import { cancelDue, scheduleAt } from '../../jobs/due.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { Outbox } from '../../mail/outbox.js';
import { webhookDisabledMail } from '../../mail/templates/webhook-disabled.js';
import type { Resealer, SecretBox } from '../../secrets.js';
import {
  parseTargetUrl,
  resolveTarget,
  serversLookup,
  systemLookup,
  TargetRefused,
  targetPolicy,
} from './url-guard.js';
import * as repo from './webhooks.repo.js';
import { type AttemptResult, postWebhook, RESPONSE_EXCERPT_BYTES } from './webhooks.send.js';

export type { AttemptRow, DeliveryRow, EndpointRow } from './webhooks.repo.js';

const HOUR_MS = 3_600_000;
/** A delivery is retried for 3 days; an endpoint failing for 3 days is disabled. */
export const GIVE_UP_MS = 72 * HOUR_MS;
/** Both signatures are sent for 24 h after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * HOUR_MS;
/** The delivery log: a delivery shows its latest 20 attempts and keeps its latest 50. */
export const ATTEMPTS_SHOWN = 20;
export const ATTEMPTS_KEPT = 50;
/** An attempt's error message is kept to this many characters. */
const ERROR_CHARS = 500;

/** A delivery with its latest attempts, oldest first (the delivery log). */
export type DeliveryWithAttempts = repo.DeliveryRow & { attempt_log: repo.AttemptRow[] };

async function withAttempts(db: Db, rows: repo.DeliveryRow[]): Promise<DeliveryWithAttempts[]> {
  const attempts = await repo.attemptsOf(
    db,
    rows.map((r) => r.id),
    ATTEMPTS_SHOWN,
  );
  const byDelivery = new Map<string, repo.AttemptRow[]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.delivery_id);
    if (list) list.push(a);
    else byDelivery.set(a.delivery_id, [a]);
  }
  return rows.map((r) => ({ ...r, attempt_log: byDelivery.get(r.id) ?? [] }));
}

/** Back-off after the `n`th failed attempt: 5 s, 15 s, 45 s, ... (x3) up to 8 h. */
export function backoffMs(n: number): number {
  return Math.min(5000 * 3 ** Math.max(0, n - 1), 8 * HOUR_MS);
}

export interface WebhooksDeps {
  db: Db;
  clock: Clock;
  queue: Pick<JobQueue, 'enqueue'>;
  outbox: Pick<Outbox, 'add'>;
  secretBox: SecretBox;
  /** WEBHOOK_ALLOWED_NETWORKS (besides public addresses) and WEBHOOK_TIMEOUT_MS. */
  allowedNetworks: readonly string[];
  /** DNS_SERVERS and its bounds: when set, endpoint host names are resolved through them. */
  dns?: { servers: readonly string[]; timeoutMs: number; tries: number };
  timeoutMs: number;
  /** The time signed into `webhook-timestamp` (receivers compare it with their wall clock). */
  wallClock?: () => Date;
}

export interface EndpointInput {
  url: string;
  description?: string;
  event_types?: string[];
  enabled?: boolean;
}

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;
const context = (id: string, which: 'current' | 'previous') => `webhook-endpoint:${id}:${which}`;

/**
 * Issue 22: webhook endpoints (owners only), their signed deliveries and the delivery log.
 * Deliveries are sent by the `webhook-deliver` job, in event order per endpoint and install.
 */
export function createWebhooksService(deps: WebhooksDeps) {
  const { db, clock, queue, outbox, secretBox, timeoutMs } = deps;
  const policy = targetPolicy(deps.allowedNetworks);
  const lookup = deps.dns && deps.dns.servers.length > 0 ? serversLookup(deps.dns) : systemLookup;
  const wallClock = deps.wallClock ?? (() => new Date());

  /** Webhook endpoints are managed by the account's owners: 404 for strangers, 403 for other roles. */
  function requireOwner(caller: Caller, accountId: string) {
    // One check for roles and scoped credentials alike (a read- or operate-scoped credential: 403).
    requireAccount(caller, accountId, 'webhooks:manage');
  }

  async function requireEndpoint(caller: Caller, accountId: string, id: string) {
    requireOwner(caller, accountId);
    const row = await repo.findEndpoint(db, accountId, id);
    if (!row) throw Errors.notFound();
    return row;
  }

  /** Refuses (400) a URL of the wrong shape or one that resolves to a non-public address. */
  async function checkUrl(raw: string) {
    const url = parseTargetUrl(raw);
    if (typeof url === 'string')
      throw Errors.invalidValue('webhook_endpoint', 'url', `The URL ${url}`, 'invalid_url');
    try {
      await resolveTarget(url.hostname, policy, lookup);
    } catch (err) {
      if (err instanceof TargetRefused)
        throw Errors.invalidValue(
          'webhook_endpoint',
          'url',
          `The URL is refused: ${err.message}`,
          'url_refused',
        );
      throw err;
    }
    return url.toString();
  }

  const open = (sealed: string, id: string, which: 'current' | 'previous') =>
    secretBox.open(sealed, context(id, which)).toString('utf8');

  /** The signatures of a delivery: the current secret's, and the previous one's during its overlap. */
  function signatures(endpoint: repo.EndpointRow, msgId: string, at: Date, payload: string) {
    const sigs = [new Webhook(open(endpoint.secret, endpoint.id, 'current')).sign(msgId, at, payload)];
    if (
      endpoint.previous_secret &&
      endpoint.previous_secret_expires_at &&
      endpoint.previous_secret_expires_at > clock.now()
    )
      sigs.push(
        new Webhook(open(endpoint.previous_secret, endpoint.id, 'previous')).sign(msgId, at, payload),
      );
    return sigs.join(' ');
  }

  /** In `tx`: the next pending delivery of the lane (if any) is queued now. */
  async function chain(tx: Db, d: repo.DeliveryRow) {
    const next = await repo.pendingInLane(tx, d, 'after');
    if (next) await queue.enqueue(tx, 'webhook-deliver', { delivery_id: next.id });
  }

  async function record(deliveryId: string, startedAt: Date, result: AttemptResult) {
    const ok = result.status !== null && result.status >= 200 && result.status < 300;
    await withTransaction(db, async (tx) => {
      const d = await repo.findDelivery(tx, deliveryId, true);
      if (d?.status !== 'pending') return;
      const endpoint = await repo.findEndpointById(tx, d.endpoint_id, true);
      const now = clock.now();
      const attempt = {
        attempts: d.attempts + 1,
        last_attempt_at: now,
        last_status_code: result.status,
        last_latency_ms: result.latencyMs,
        last_error: ok ? null : (result.error ?? `HTTP ${result.status}`).slice(0, ERROR_CHARS),
        last_response: result.excerpt?.slice(0, RESPONSE_EXCERPT_BYTES) ?? null,
      };
      // The delivery log: this attempt, with the response excerpt and never the request's headers.
      await repo.insertAttempt(
        tx,
        {
          delivery_id: d.id,
          attempt: attempt.attempts,
          started_at: startedAt,
          status_code: result.status,
          error_kind: ok ? null : (result.errorKind ?? 'http_status'),
          error: attempt.last_error,
          latency_ms: result.latencyMs,
          response_excerpt: attempt.last_response,
        },
        ATTEMPTS_KEPT,
      );
      if (ok) {
        const done = await repo.updateDelivery(tx, d.id, {
          ...attempt,
          status: 'delivered',
          delivered_at: now,
          next_attempt_at: null,
        });
        if (endpoint?.failing_since) await repo.updateEndpoint(tx, endpoint.id, { failing_since: null });
        if (done) await chain(tx, done);
        return;
      }
      const expired = now.getTime() - d.created_at.getTime() >= GIVE_UP_MS;
      if (expired) {
        const failed = await repo.updateDelivery(tx, d.id, {
          ...attempt,
          status: 'failed',
          next_attempt_at: null,
        });
        if (failed) await chain(tx, failed);
      } else {
        const next = new Date(now.getTime() + backoffMs(attempt.attempts));
        await repo.updateDelivery(tx, d.id, { ...attempt, next_attempt_at: next });
        await scheduleAt(tx, `webhook:${d.id}`, 'webhook-deliver', { delivery_id: d.id }, next);
      }
      if (!endpoint || d.lane.startsWith('ping:')) return;
      const since = endpoint.failing_since ?? now;
      if (!endpoint.failing_since) await repo.updateEndpoint(tx, endpoint.id, { failing_since: now });
      if (endpoint.enabled && now.getTime() - since.getTime() >= GIVE_UP_MS) {
        await repo.updateEndpoint(tx, endpoint.id, {
          enabled: false,
          disabled_reason: `Deliveries failed for 3 days (since ${since.toISOString()})`,
          updated_at: now,
        });
        const mail = webhookDisabledMail({
          endpoint,
          failingSince: since,
          lastError: attempt.last_error ?? '',
        });
        const owners = [
          ...new Set((await repo.ownerEmails(tx, endpoint.account_id)).map((e) => e.toLowerCase())),
        ];
        await outbox.add(
          tx,
          owners.map((to) => ({
            operation_id: null,
            event: `webhook_endpoint.disabled:${endpoint.id}`,
            to,
            ...mail,
          })),
        );
      }
    });
  }

  /** Finishes a pending delivery without an attempt (its endpoint is disabled or gone). */
  async function abandon(deliveryId: string, reason: string) {
    await withTransaction(db, async (tx) => {
      const d = await repo.findDelivery(tx, deliveryId, true);
      if (d?.status !== 'pending') return;
      const failed = await repo.updateDelivery(tx, d.id, {
        status: 'failed',
        last_error: reason,
        next_attempt_at: null,
      });
      if (failed) await chain(tx, failed);
    });
  }

  return {
    async list(caller: Caller, accountId: string, page: Page) {
      requireOwner(caller, accountId);
      return repo.listEndpoints(db, accountId, page);
    },

    get: (caller: Caller, accountId: string, id: string) => requireEndpoint(caller, accountId, id),

    /** The endpoint and its secret, which is shown this once. */
    async create(caller: Caller, accountId: string, input: EndpointInput) {
      requireOwner(caller, accountId);
      const url = await checkUrl(input.url);
      const id = randomUUID();
      const secret = newSecret();
      const now = clock.now();
      const row = await repo.insertEndpoint(db, {
        id,
        account_id: accountId,
        url,
        description: input.description ?? '',
        event_types: [...new Set(input.event_types ?? [])],
        enabled: input.enabled ?? true,
        secret: secretBox.seal(Buffer.from(secret, 'utf8'), context(id, 'current')),
        created_at: now,
        updated_at: now,
      });
      return { row, secret };
    },

    async update(caller: Caller, accountId: string, id: string, input: Partial<EndpointInput>) {
      const current = await requireEndpoint(caller, accountId, id);
      const url = input.url !== undefined ? await checkUrl(input.url) : undefined;
      const reenabled = input.enabled === true && !current.enabled;
      const row = await repo.updateEndpoint(db, id, {
        ...(url !== undefined && { url }),
        ...(input.description !== undefined && { description: input.description }),
        ...(input.event_types !== undefined && { event_types: [...new Set(input.event_types)] }),
        ...(input.enabled !== undefined && { enabled: input.enabled }),
        ...(reenabled && { failing_since: null, disabled_reason: null }),
        updated_at: clock.now(),
      });
      if (!row) throw Errors.notFound();
      return row;
    },

    async remove(caller: Caller, accountId: string, id: string) {
      requireOwner(caller, accountId);
      if (!(await repo.deleteEndpoint(db, accountId, id))) throw Errors.notFound();
    },

    /** A new secret (shown once); the old one keeps signing beside it for 24 h. */
    async rotate(caller: Caller, accountId: string, id: string) {
      const current = await requireEndpoint(caller, accountId, id);
      const secret = newSecret();
      const now = clock.now();
      const previous = secretBox.seal(
        Buffer.from(open(current.secret, id, 'current'), 'utf8'),
        context(id, 'previous'),
      );
      const row = await repo.updateEndpoint(db, id, {
        secret: secretBox.seal(Buffer.from(secret, 'utf8'), context(id, 'current')),
        previous_secret: previous,
        previous_secret_expires_at: new Date(now.getTime() + ROTATION_OVERLAP_MS),
        updated_at: now,
      });
      if (!row) throw Errors.notFound();
      return { row, secret };
    },

    /** A `webhook.ping` delivery to this endpoint only (not an event of the account). */
    async ping(caller: Caller, accountId: string, id: string) {
      const endpoint = await requireEndpoint(caller, accountId, id);
      const eventId = randomUUID();
      const now = clock.now();
      const payload = JSON.stringify({
        id: eventId,
        type: 'webhook.ping',
        created_at: now.toISOString(),
        account_id: accountId,
        install_id: null,
        resource: { type: 'webhook_endpoint', id: endpoint.id },
        data: {},
      });
      return withTransaction(db, async (tx) => {
        const [deliveryId] = await repo.insertDeliveries(tx, [
          {
            endpoint_id: endpoint.id,
            account_id: accountId,
            event_id: eventId,
            event_type: 'webhook.ping',
            lane: `ping:${eventId}`,
            payload,
            status: 'pending',
            created_at: now,
          },
        ]);
        if (!deliveryId) throw new Error('ping delivery not inserted');
        await queue.enqueue(tx, 'webhook-deliver', { delivery_id: deliveryId });
        const row = await repo.findDelivery(tx, deliveryId);
        if (!row) throw new Error('ping delivery not found');
        return { ...row, attempt_log: [] };
      });
    },

    /** The delivery log: a page of deliveries, newest first, each with its latest attempts. */
    async deliveries(caller: Caller, accountId: string, id: string, page: Page) {
      await requireEndpoint(caller, accountId, id);
      const { count, rows } = await repo.listDeliveries(db, id, page);
      return { count, rows: await withAttempts(db, rows) };
    },

    /** One delivery of the endpoint with its latest attempts; another endpoint's is a 404 (G4). */
    async delivery(caller: Caller, accountId: string, id: string, deliveryId: string) {
      await requireEndpoint(caller, accountId, id);
      const d = await repo.findEndpointDelivery(db, id, deliveryId);
      if (!d) throw Errors.notFound();
      const [shown] = await withAttempts(db, [d]);
      return shown ?? { ...d, attempt_log: [] };
    },

    /** Sends a delivery again (delivered, failed, or pending: now instead of at its next back-off). */
    async redeliver(caller: Caller, accountId: string, id: string, deliveryId: string) {
      await requireEndpoint(caller, accountId, id);
      return withTransaction(db, async (tx) => {
        const d = await repo.findEndpointDelivery(tx, id, deliveryId);
        if (!d) throw Errors.notFound();
        await cancelDue(tx, `webhook:${d.id}`);
        const row = await repo.updateDelivery(tx, d.id, {
          status: 'pending',
          next_attempt_at: null,
          delivered_at: null,
          // A redelivery gets 3 more days.
          created_at: clock.now(),
        });
        await queue.enqueue(tx, 'webhook-deliver', { delivery_id: d.id });
        const [shown] = await withAttempts(tx, [row ?? d]);
        return shown ?? { ...d, attempt_log: [] };
      });
    },

    /**
     * The `webhook-deliver` job: one attempt of a pending delivery, unless an earlier delivery of its
     * endpoint and lane is still pending (that one queues this one when it ends). A success is
     * recorded, a failure too with its next attempt as due work; a crash between the POST and the
     * record sends it again (the receiver dedupes on `webhook-id`, the event id).
     */
    async deliver(deliveryId: string) {
      const d = await repo.findDelivery(db, deliveryId);
      if (d?.status !== 'pending') return;
      if (await repo.pendingInLane(db, d, 'before')) return;
      const endpoint = await repo.findEndpointById(db, d.endpoint_id);
      if (!endpoint) return abandon(d.id, 'The endpoint was deleted');
      if (!endpoint.enabled) return abandon(d.id, 'The endpoint is disabled');
      const startedAt = clock.now();
      const at = wallClock();
      const headers = {
        'webhook-id': d.event_id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': signatures(endpoint, d.event_id, at, d.payload),
      };
      const result = await postWebhook(endpoint.url, headers, d.payload, {
        timeoutMs,
        policy,
        lookup,
      });
      await record(d.id, startedAt, result);
    },

    /** The job's retries are used up (the database failed every time): the delivery is given up. */
    exhausted: (deliveryId: string, error: string) => abandon(deliveryId, `Delivery failed: ${error}`),
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;

/** `hostplane reseal`: every endpoint secret under the new key, in the caller's transaction. */
export async function resealWebhookSecrets(tx: Db, reseal: Resealer) {
  let resealed = 0;
  let current = 0;
  let after: string | null = null;
  for (;;) {
    const batch = await repo.sealedSecrets(tx, after, 500);
    for (const row of batch) {
      const next = reseal(row.secret, context(row.id, 'current'));
      const prev = row.previous_secret ? reseal(row.previous_secret, context(row.id, 'previous')) : null;
      if (next === null && prev === null) current++;
      else {
        await repo.updateEndpoint(tx, row.id, {
          ...(next !== null && { secret: next }),
          ...(prev !== null && { previous_secret: prev }),
        });
        resealed++;
      }
    }
    const last = batch.at(-1);
    if (!last) return { resealed, current };
    after = last.id;
  }
}
