import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../auth/access.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { Clock } from '../clock.js';
import type { WriteCounter } from '../db/client.js';
import { Errors } from '../errors.js';
import { callerOf, parseBasic } from './auth.js';
import { baseUrl } from './pagination.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the read cache on a miss: where the rendered body goes once sent. */
    readCache: { key: string; versions: string } | null;
    /** A route whose body depends on the clock sets when it stops being true (ms since the epoch). */
    bodyValidUntil: number | null;
  }
}

/**
 * The GETs whose bodies the cache keeps: each depends only on rows of the caller's accounts (every
 * table they read has a version trigger, migration 0009), the caller's visibility scope and the URL.
 * listDomains depends on the clock too (a certificate expires): its route sets `bodyValidUntil`.
 * A route is added here only when all of that holds for it (docs/decisions.md).
 */
export const CACHED_OPERATIONS: ReadonlySet<string> = new Set([
  'listSites',
  'getSite',
  'listInstalls',
  'getInstall',
  'listDomains',
  'listBackups',
  'showBackup',
  'getOperation',
  'listInstallOperations',
]);

interface Entry {
  /** The rendered body, encoded once: a hit writes these bytes as they are (no UTF-8 encoding per request). */
  body: Buffer;
  etag: string;
  versions: string;
  validUntil: number | null;
}

export interface ReadCacheOptions {
  authenticator: Authenticator;
  clock: Clock;
  publicUrl: string | null;
  /** Most entries (0: no cache). */
  entries: number;
  /** Most bytes of bodies held. */
  bytes: number;
  /**
   * PGlite only (Database.writes): while this count has not moved since a lookup began, nothing can
   * have committed since, so that lookup's versions are still the current ones and no query is made.
   */
  writes?: WriteCounter | null;
}

/** What a body may depend on of the caller: its accounts, roles and (partial members) installs. */
function scopeOf(caller: Caller): string {
  return [...caller.memberships.values()]
    .sort((a, b) => (a.accountId < b.accountId ? -1 : 1))
    .map(
      (m) =>
        `${m.accountId}=${m.roles}${m.installIds ? `:${[...m.installIds].sort().join(',')}` : ''}${m.limit ? `/${[...m.limit].sort().join(',')}` : ''}`,
    )
    .join(';');
}

/**
 * Issue 14: a bounded in-process cache of rendered GET bodies that is never stale. Every request
 * still passes Basic auth (the onRequest hook) and then, here, makes one lookup: the membership epoch
 * and the data versions of the caller's accounts (bumped at the commit of every write to them, by
 * triggers, whichever process wrote). A body is served from the cache only when it was rendered for
 * the same route, URL, base URL and visibility scope under the very same versions; otherwise the
 * route runs (authorization included) and its body is kept under the versions read *before* it ran,
 * so a write that commits meanwhile only makes the entry miss next time. A moved epoch (a membership
 * or password changed anywhere) drops the process's cached callers and verifies this one again.
 * A hit is a 200 (or 304) for a route the same scope was allowed to read under the same data, so
 * the authorization outcome is the one the route computed.
 */
export function createReadCache(options: ReadCacheOptions) {
  const { authenticator, clock, publicUrl } = options;
  const entries = new Map<string, Entry>();
  const scopes = new WeakMap<Caller, { scope: string; accounts: string[] }>();
  let held = 0;

  function scopeData(caller: Caller) {
    let data = scopes.get(caller);
    if (!data) {
      data = { scope: scopeOf(caller), accounts: [...caller.memberships.keys()].sort() };
      scopes.set(caller, data);
    }
    return data;
  }

  function drop(key: string, entry: Entry) {
    entries.delete(key);
    held -= entry.body.length;
  }

  function store(key: string, entry: Entry) {
    const old = entries.get(key);
    if (old) drop(key, old);
    if (entry.body.length > options.bytes / 8) return;
    entries.set(key, entry);
    held += entry.body.length;
    for (const [oldestKey, oldest] of entries) {
      if (entries.size <= options.entries && held <= options.bytes) break;
      drop(oldestKey, oldest);
    }
  }

  type Freshness = Awaited<ReturnType<Authenticator['freshness']>>;
  interface Batch {
    running: Promise<Freshness> | null;
    queued: Promise<Freshness> | null;
    /** The last lookup's versions and the write count read before it began (PGlite only). */
    known: { writes: number; versions: string } | null;
  }
  const batches = new Map<string, Batch>();
  const { writes } = options;

  function start(batch: Batch, accounts: string[]) {
    const before = writes?.count;
    const lookup: Promise<Freshness> = authenticator.freshness(accounts).finally(() => {
      if (batch.running === lookup) batch.running = null;
    });
    if (before !== undefined)
      lookup.then(
        ({ versions }) => {
          if (!batch.known || batch.known.writes <= before) batch.known = { writes: before, versions };
        },
        () => {},
      );
    batch.running = lookup;
    return lookup;
  }

  /**
   * The lookup for these accounts, shared by concurrent requests, but only ever one that *began after*
   * the request arrived: while one runs, newcomers wait for the next, which starts when it ends (one
   * running and one queued at most). So a request that starts after a write's response still reads
   * the version that write committed, and a burst of reads costs two lookups per round trip, not one
   * per request.
   */
  function freshness(accounts: string[]): Promise<Freshness> {
    const key = accounts.join(',');
    let batch = batches.get(key);
    if (!batch) {
      batch = { running: null, queued: null, known: null };
      batches.set(key, batch);
      if (batches.size > options.entries) batches.delete(batches.keys().next().value as string);
    }
    // Nothing written since that lookup began: its versions are still the current ones.
    if (writes && batch.known?.writes === writes.count)
      return Promise.resolve({ versions: batch.known.versions, epochMoved: false });
    const b = batch;
    if (!b.running) return start(b, accounts);
    b.queued ??= b.running
      .catch(() => undefined)
      .then(() => {
        b.queued = null;
        return start(b, accounts);
      });
    return b.queued;
  }

  async function preHandler(request: FastifyRequest, reply: FastifyReply) {
    if (request.method !== 'GET') return;
    let caller = callerOf(request);
    let fresh = await freshness(scopeData(caller).accounts);
    // A moved epoch, seen by this lookup or by a concurrent one since this caller was cached.
    if (fresh.epochMoved || authenticator.isStale(caller)) {
      // A membership or credential changed somewhere: this caller may be out of date.
      const pair = parseBasic(request.headers.authorization);
      const again = pair ? await authenticator.verify(pair.username, pair.password) : null;
      if (!again) throw Errors.unauthenticated();
      request.caller = caller = again;
      fresh = await freshness(scopeData(caller).accounts);
    }
    const key = `${request.routeOptions.url}\n${request.url}\n${baseUrl(request, publicUrl)}\n${scopeData(caller).scope}`;
    const hit = entries.get(key);
    if (
      hit &&
      hit.versions === fresh.versions &&
      (hit.validUntil === null || clock.now().getTime() < hit.validUntil)
    ) {
      // Most recently used last.
      entries.delete(key);
      entries.set(key, hit);
      reply.header('etag', hit.etag);
      reply.type('application/json; charset=utf-8');
      return reply.send(hit.body);
    }
    if (hit) drop(key, hit);
    request.readCache = { key, versions: fresh.versions };
    return;
  }

  /**
   * Route-level onSend (after the ETag hook, whose tag it keeps): stores a rendered 200. A callback
   * hook: it runs on every cached route's answer and never waits (an async one costs a promise each).
   */
  function onSend(
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
    done: (err: null, payload: unknown) => void,
  ): void {
    done(null, stored(request, reply, payload));
  }

  function stored(request: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
    const pending = request.readCache;
    if (!pending) return payload;
    request.readCache = null;
    const etag = reply.getHeader('etag');
    if (reply.statusCode === 200 && typeof payload === 'string' && typeof etag === 'string') {
      store(pending.key, {
        body: Buffer.from(payload, 'utf8'),
        etag,
        versions: pending.versions,
        validUntil: request.bodyValidUntil,
      });
    }
    return payload;
  }

  return {
    preHandler,
    onSend,
    /** Entries and bytes held (tests, benchmarks). */
    stats: () => ({ entries: entries.size, bytes: held }),
  };
}

export type ReadCache = ReturnType<typeof createReadCache>;
