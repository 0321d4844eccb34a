import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../auth/access.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { CredentialGate } from '../auth/credentials.js';
import { safeEqual } from '../auth/passwords.js';
import { Errors } from '../errors.js';
import { decodeUtf8, isStorableText } from './input.js';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

const MAX_HEADER = 1024;

/** Parses `Authorization: Basic base64(username:password)`; null when absent or malformed. */
export function parseBasic(header: string | undefined): { username: string; password: string } | null {
  if (!header || header.length > MAX_HEADER) return null;
  const match = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!match?.[1]) return null;
  // Issue 13: bytes that are not UTF-8, a NUL or a lone surrogate can name no user: no lookup, a 401.
  const decoded = decodeUtf8(Buffer.from(match[1], 'base64'));
  if (decoded === null || !isStorableText(decoded)) return null;
  const colon = decoded.indexOf(':');
  if (colon <= 0) return null;
  const username = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (username.length > 128 || password.length === 0 || password.length > 256) return null;
  return { username, password };
}

/** What a request's Basic header names: its pair (null when malformed) and the credential cache's key. */
export interface BasicCredential {
  username: string;
  password: string;
  key: string;
}

/**
 * Issue 29 (decision 218): the Basic credential of a request, remembered per connection. A client on a
 * keep-alive connection sends the same `Authorization` header with every request; decoding it
 * (base64, UTF-8 checks) and deriving the credential cache's key (a SHA-256) was ~8 % of a cached
 * read's CPU. The connection's last header and what it gave are kept while the socket lives (a
 * WeakMap: gone with the socket), so a repeated header costs one string comparison. Nothing is
 * decided here: the caller still comes from the authenticator's cache, with its expiry, refresh and
 * invalidations, or from a verification.
 */
export function connectionCredentials(authenticator: Pick<Authenticator, 'keyOf'>) {
  const bySocket = new WeakMap<object, { header: string; credential: BasicCredential }>();
  return (request: FastifyRequest): BasicCredential | null => {
    const header = request.headers.authorization;
    if (header === undefined) return null;
    const socket = request.raw.socket as object | null;
    const last = socket ? bySocket.get(socket) : undefined;
    if (last && last.header === header) return last.credential;
    const pair = parseBasic(header);
    if (!pair) return null;
    const credential = { ...pair, key: authenticator.keyOf(pair.username, pair.password) };
    if (socket) bySocket.set(socket, { header, credential });
    return credential;
  };
}

/** G2: an onRequest hook that sets `request.caller` or answers 401 with the bad-credentials message. */
export function basicAuthHook(
  authenticator: Authenticator,
  gate?: Pick<CredentialGate, 'admit'>,
  credentialOf: (request: FastifyRequest) => BasicCredential | null = connectionCredentials(authenticator),
) {
  // Issue 22: a scoped credential's expiry and IP allow-list, on the cached path too (no query).
  const admit = (request: FastifyRequest, caller: Caller) => {
    if (gate && !gate.admit(caller, request.ip)) {
      request.caller = null;
      throw Errors.unauthenticated();
    }
  };
  return async (request: FastifyRequest) => {
    // Another process may have changed memberships: at most one epoch read a second (authenticator.ts).
    const syncing = authenticator.sync();
    if (syncing) await syncing;
    // Verified from the cache by the rate limiter's key generator, and no invalidation since.
    if (request.caller && authenticator.isCurrent(request.caller)) return admit(request, request.caller);
    request.caller = null;
    const pair = credentialOf(request);
    if (!pair) throw Errors.unauthenticated();
    // A pair verified within the cache's life: the caller, with nothing allocated for a verification.
    const hit = authenticator.cachedByKey(pair.key);
    if (hit) {
      // The scoped credential's gate (expiry, IP allow-list) applies on the cached path too.
      admit(request, hit);
      request.caller = hit;
      return;
    }
    // Issue 20: failed sign-ins are counted per client address, and a client that has gone (its
    // connection closed while it waited for a hash slot) is not hashed for.
    const caller = await authenticator.verify(pair.username, pair.password, {
      ip: request.ip,
      alive: () => connected(request),
    });
    if (!caller) throw Errors.unauthenticated();
    admit(request, caller);
    request.caller = caller;
  };
}

/** False once the client closed the connection of `request` (nobody would read the answer). */
export function connected(request: FastifyRequest): boolean {
  return !request.raw.destroyed && request.raw.socket?.destroyed !== true;
}

/** The caller of an authenticated route (set by {@link basicAuthHook}). */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw Errors.unauthenticated();
  return request.caller;
}

/**
 * `Authorization: Bearer <token>` for one of `tokens`, compared in constant time (each one is
 * compared, so the time does not tell which matched). 401 otherwise.
 */
export function bearerAuthHook(tokens: readonly string[]) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    const match = /^Bearer\s+(\S{1,512})\s*$/i.exec(request.headers.authorization ?? '');
    const given = match?.[1];
    let ok = false;
    for (const token of tokens) if (given !== undefined && safeEqual(given, token)) ok = true;
    if (!ok) throw Errors.unauthenticated();
  };
}

/**
 * `/admin/v1`: `Authorization: Bearer <HOSTPLANE_ADMIN_TOKEN>`; during a rotation, the previous
 * token (HOSTPLANE_ADMIN_TOKEN_PREVIOUS) too (docs/operations.md).
 */
export function adminAuthHook(adminToken: string, previous: string | null = null) {
  return bearerAuthHook(previous ? [adminToken, previous] : [adminToken]);
}
