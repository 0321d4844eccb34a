import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { REPLAYED_HEADER } from './idempotency.js';
import { isDryRun } from './schemas.js';

/**
 * Issue 22: the audit log's hooks on every POST, PUT, PATCH and DELETE of a scope (public and admin
 * API). preHandler (after authentication, validation and the Idempotency-Key claim): the attempt is
 * recorded, with what the resource was before; onSend: the row is completed with the status, what it
 * is after and the operation started, or removed when the call changed nothing (an error answer, an
 * Idempotency-Key replay). A process that dies in between leaves the attempt recorded with a null
 * status (at least once; docs/decisions.md #109). A dry run (`?dry_run=true`) writes nothing.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** False: the route's answer is a secret (a sign-in link): the audit log records the call without it. */
    auditResponse?: boolean;
  }
  interface FastifyRequest {
    /** `keepResponse` false: the answer is a secret (route config `auditResponse: false`), not recorded. */
    audit: { begun: AuditBegun; entry: AuditStart; keepResponse: boolean } | null;
  }
}

export interface AuditActor {
  type: 'user' | 'admin';
  userId: string | null;
  credentialId: string | null;
}

/** What the preHandler knows of a call. */
export interface AuditStart {
  actor: AuditActor;
  ip: string;
  requestId: string;
  method: string;
  path: string;
  action: string;
  resourceType: string;
  params: Record<string, string>;
  body: unknown;
}

/** What onSend adds. */
export interface AuditFinish {
  status: number;
  /** The answer's JSON body (a created resource, an operation), when there is one. */
  response: unknown;
  /** The Location header (an operation's URL for 202s). */
  location: string | null;
}

/** The recorded attempt: its row, and the resource as it was (for the fields changed). */
export interface AuditBegun {
  id: string;
  before: Record<string, unknown> | null;
}

/** What the hooks need of the audit service (modules/audit, structural). */
export interface AuditStore {
  begin(entry: AuditStart): Promise<AuditBegun>;
  finish(begun: AuditBegun, entry: AuditStart, outcome: AuditFinish): Promise<void>;
  discard(id: string): Promise<void>;
}

export interface AuditOptions {
  store: AuditStore;
  actorOf: (request: FastifyRequest) => AuditActor;
  /** Counts what the hooks did (metrics): recorded, discarded, failed writes. */
  onOutcome?: (outcome: 'recorded' | 'discarded' | 'failed') => void;
}

const AUDITED = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function parseJson(payload: unknown): unknown {
  if (typeof payload !== 'string' || payload.length === 0 || payload.length > 1_000_000) return null;
  try {
    return JSON.parse(payload);
  } catch {
    return null;
  }
}

function appendHook(route: RouteOptions, name: 'preHandler' | 'onSend', hook: unknown) {
  const existing = route[name] ? [route[name]].flat() : [];
  (route as unknown as Record<string, unknown>)[name] = [...existing, hook];
}

export function useAuditLog(scope: FastifyInstance, options: AuditOptions) {
  const { store, actorOf, onOutcome = () => {} } = options;

  async function preHandler(request: FastifyRequest) {
    request.audit = null;
    // A dry run changes nothing, so nothing is recorded.
    if (isDryRun(request)) return;
    const route = request.routeOptions;
    const config = (route.config ?? {}) as { resource?: string; auditResponse?: boolean };
    const path = route.url ?? request.url;
    const entry: AuditStart = {
      actor: actorOf(request),
      ip: request.ip,
      requestId: String(request.id),
      method: request.method,
      path,
      action: String(route.schema?.operationId ?? `${request.method} ${path}`),
      resourceType: config.resource ?? path.split('/').filter(Boolean)[2] ?? 'unknown',
      params: (request.params ?? {}) as Record<string, string>,
      body: request.body ?? null,
    };
    // Recorded before the route runs: if this fails, the call does not run (500).
    request.audit = { begun: await store.begin(entry), entry, keepResponse: config.auditResponse !== false };
  }

  async function onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
    const audit = request.audit;
    if (!audit) return payload;
    request.audit = null;
    const status = reply.statusCode;
    try {
      if (status >= 400 || reply.getHeader(REPLAYED_HEADER) !== undefined) {
        await store.discard(audit.begun.id);
        onOutcome('discarded');
      } else {
        const location = reply.getHeader('location');
        await store.finish(audit.begun, audit.entry, {
          status,
          response: audit.keepResponse ? parseJson(payload) : null,
          location: location === undefined ? null : String(location),
        });
        onOutcome('recorded');
      }
    } catch (err) {
      // The attempt stays recorded (status null); the answer stands.
      onOutcome('failed');
      request.log.warn({ err }, 'audit log: the outcome could not be recorded');
    }
    return payload;
  }

  scope.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (!methods.some((m) => AUDITED.has(m))) return;
    appendHook(route, 'preHandler', preHandler);
    appendHook(route, 'onSend', onSend);
  });
}
