import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { Errors } from '../errors.js';
import { ErrorSchema, errorResponses, isDryRun, ValidationErrorSchema } from './schemas.js';

/**
 * Issue 22: `Idempotency-Key` on every POST, PATCH and DELETE of a scope (the semantics Stripe
 * documents; docs/decisions.md). The key is checked and the request fingerprinted before schema
 * validation (preValidation: the body as sent), claimed after it (preHandler: a request that fails
 * validation never ran, so it is neither stored nor holds the key), and the response is stored in
 * onSend. 5xx responses are not stored: the key is released so a retry runs.
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's Idempotency-Key, set by the preValidation hook; `token` once it is claimed. */
    idempotency: { key: string; fingerprint: string; scope: string | null; token: string | null } | null;
  }
}

/** What a replay answers with: the stored status, headers (see {@link REPLAYED_HEADERS}) and body. */
export interface ReplayableResponse {
  status: number;
  headers: Record<string, string>;
  body: string | null;
}

/** What the hooks need of the idempotency service (modules/idempotency, structural). */
export interface IdempotencyStore {
  claim(
    scope: string,
    key: string,
    fingerprint: string,
  ): Promise<
    | { kind: 'claimed'; token: string }
    | { kind: 'replay'; response: ReplayableResponse }
    | { kind: 'mismatch' }
    | { kind: 'in_use'; retryAfterSeconds: number }
  >;
  store(scope: string, key: string, token: string, response: ReplayableResponse): Promise<void>;
  release(scope: string, key: string, token: string): Promise<void>;
}

export type IdempotencyOutcome = 'replayed' | 'mismatch' | 'in_use';

export interface IdempotencyOptions {
  store: IdempotencyStore;
  /** Whose keys these are: keys of two scopes never meet (a user id; the admin token's one scope). */
  scopeOf: (request: FastifyRequest) => string;
  /** Counts what the keys did (metrics). */
  onOutcome?: (outcome: IdempotencyOutcome) => void;
}

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';
/** 1-255 printable ASCII characters, no spaces. */
const VALID_KEY = /^[\x21-\x7e]{1,255}$/;
const MUTATING = new Set(['POST', 'PATCH', 'DELETE']);
/** The headers a replay repeats; never Date, the request id, rate-limit or Retry-After headers. */
const REPLAYED_HEADERS = ['content-type', 'location', 'etag', 'last-modified', 'link', 'content-location'];

/** JSON with object keys sorted at every level: equal values, equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** SHA-256 (hex) of method, route pattern, path parameters, query and body, each in canonical form. */
export function requestFingerprint(request: {
  method: string;
  route: string;
  params: unknown;
  query: unknown;
  body: unknown;
}): string {
  const text = [
    request.method,
    request.route,
    canonicalJson(request.params ?? {}),
    canonicalJson(request.query ?? {}),
    canonicalJson(request.body ?? null),
  ].join('\n');
  return createHash('sha256').update(text).digest('hex');
}

function invalidKey() {
  return Errors.invalidValue(
    'request',
    'Idempotency-Key',
    'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces',
    'idempotency_key_invalid',
  );
}

function appendHook<K extends 'preValidation' | 'preHandler' | 'onSend'>(
  route: RouteOptions,
  name: K,
  hook: unknown,
) {
  const existing = route[name] ? [route[name]].flat() : [];
  (route as unknown as Record<K, unknown>)[name] = [...existing, hook];
}

/** Adds the Idempotency-Key hooks (and their documentation) to every POST, PATCH and DELETE of `scope`. */
export function useIdempotencyKeys(scope: FastifyInstance, options: IdempotencyOptions) {
  const { store, scopeOf, onOutcome = () => {} } = options;

  async function preValidation(request: FastifyRequest) {
    request.idempotency = null;
    const key = request.headers[IDEMPOTENCY_HEADER];
    // A dry run keeps no key (it writes nothing): the same key still runs the real call afterwards.
    if (key === undefined || isDryRun(request)) return;
    // A repeated header arrives joined by ", ", which has a space: refused as well.
    if (typeof key !== 'string' || !VALID_KEY.test(key)) throw invalidKey();
    const fingerprint = requestFingerprint({
      method: request.method,
      route: request.routeOptions.url ?? request.url,
      params: request.params,
      query: request.query,
      body: request.body,
    });
    request.idempotency = { key, fingerprint, scope: null, token: null };
  }

  async function preHandler(request: FastifyRequest, reply: FastifyReply) {
    const state = request.idempotency;
    if (!state) return;
    const owner = scopeOf(request);
    const claim = await store.claim(owner, state.key, state.fingerprint);
    switch (claim.kind) {
      case 'claimed':
        state.scope = owner;
        state.token = claim.token;
        return;
      case 'replay': {
        request.idempotency = null;
        onOutcome('replayed');
        const { status, headers, body } = claim.response;
        reply.status(status).headers(headers).header(REPLAYED_HEADER, 'true');
        return body === null ? reply.send() : reply.send(body);
      }
      case 'mismatch':
        request.idempotency = null;
        onOutcome('mismatch');
        throw Errors.idempotencyKeyReused();
      case 'in_use':
        request.idempotency = null;
        onOutcome('in_use');
        throw Errors.idempotencyKeyInUse(claim.retryAfterSeconds);
    }
  }

  async function onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
    const state = request.idempotency;
    if (!state?.token || !state.scope) return payload;
    request.idempotency = null;
    const status = reply.statusCode;
    const storable = payload === undefined || payload === null || typeof payload === 'string';
    try {
      // Stripe: a request that ran is kept, its 4xx included; a 5xx (and a body that cannot be kept)
      // gives the key back. 401 and 429 never get here (they are answered before the claim).
      if (status < 500 && storable) {
        const headers: Record<string, string> = {};
        for (const name of REPLAYED_HEADERS) {
          const value = reply.getHeader(name);
          if (value !== undefined) headers[name] = String(value);
        }
        await store.store(state.scope, state.key, state.token, {
          status,
          headers,
          body: typeof payload === 'string' ? payload : null,
        });
      } else {
        await store.release(state.scope, state.key, state.token);
      }
    } catch (err) {
      // The response stands; the claim expires after the lock timeout (docs/decisions.md).
      request.log.warn({ err }, 'Idempotency-Key: the response could not be stored');
    }
    return payload;
  }

  scope.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (!methods.some((m) => MUTATING.has(m))) return;
    appendHook(route, 'preValidation', preValidation);
    appendHook(route, 'preHandler', preHandler);
    appendHook(route, 'onSend', onSend);
    route.config = {
      ...route.config,
      swaggerTransform: documentIdempotency as unknown,
    } as typeof route.config;
  });
}

type Schema = Record<string, unknown>;

const KEY_DOC = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: '^[\\x21-\\x7e]+$',
  description:
    'Optional. A unique key (1-255 printable ASCII characters, no spaces) that makes retrying this ' +
    'request safe: for 24 hours the same key with the same request answers the first response ' +
    'again (with `Idempotent-Replayed: true`) instead of running twice; with another request it is ' +
    'a 422; while the first is still running, a 409 with Retry-After. Keys are per user.',
};
const REPLAYED_DOC = {
  type: 'string',
  enum: ['true'],
  description:
    'Present when this is the stored response of an earlier request with the same Idempotency-Key.',
};
const REUSED_DOC = {
  description:
    'Unprocessable: the Idempotency-Key was used with another request (method, path, query or body)',
};
const IN_USE_DOC = {
  description: 'Conflict: a request with this Idempotency-Key is still running; retry after Retry-After',
};

/**
 * The OpenAPI document's view of a route with Idempotency-Key (@fastify/swagger `swaggerTransform`,
 * documentation only: validation and serialization keep the route's own schema).
 */
function documentIdempotency({ schema, url }: { schema?: Schema; url: string }) {
  if (!schema) return { schema, url };
  const headers = (schema.headers as Schema | undefined) ?? { type: 'object', properties: {} };
  const response = { ...((schema.response as Record<string, Schema> | undefined) ?? {}) };
  // The errors of the key itself, in the shapes every route answers errors with (400: an invalid key).
  if (!response['400']) response['400'] = errorResponses(400)[400] as Schema;
  if (!response['422']) response['422'] = { ...ValidationErrorSchema, ...REUSED_DOC };
  // A route's own 409 keeps its meaning, and says the key's too.
  const conflict = response['409'];
  response['409'] = conflict
    ? {
        ...conflict,
        description: `${String(conflict.description ?? 'Conflict')}; or ${IN_USE_DOC.description.replace('Conflict: a', 'a')}`,
      }
    : { ...ErrorSchema, ...IN_USE_DOC };
  for (const [status, value] of Object.entries(response)) {
    const code = Number(status);
    if (code >= 500 || code === 401 || code === 429) continue;
    response[status] = {
      ...value,
      headers: { ...((value.headers as Schema | undefined) ?? {}), 'Idempotent-Replayed': REPLAYED_DOC },
    };
  }
  return {
    url,
    schema: {
      ...schema,
      headers: {
        ...headers,
        properties: { ...((headers.properties as Schema | undefined) ?? {}), 'Idempotency-Key': KEY_DOC },
      },
      response,
    },
  };
}
