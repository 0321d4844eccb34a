import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import { type Database, ping } from './db/client.js';
import { Errors } from './errors.js';
import { type AuditOptions, useAuditLog } from './http/audit.js';
import { adminAuthHook, basicAuthHook, callerOf, connectionCredentials } from './http/auth.js';
import { httpEdge } from './http/edge.js';
import { errorHandler, notFoundHandler } from './http/error-handler.js';
import { etagHook } from './http/etag.js';
import { useIdempotencyKeys } from './http/idempotency.js';
import { installInputGuard } from './http/input.js';
import { lazySchemaCompilers } from './http/lazy-schemas.js';
import { CACHED_OPERATIONS, createReadCache, type ReadCache } from './http/read-cache.js';
import { boundedCheck, probeTimeoutMs } from './http/readiness.js';
import { requestLoggerFactory } from './http/request-logger.js';
import { metricsRoutes } from './modules/metrics/metrics.routes.js';
import type { Metrics } from './modules/metrics/metrics.service.js';
import { healthRoutes } from './modules/system/system.routes.js';
import { type MountContext, openapiOptions, registerRoutes } from './routes.js';
import type { Services } from './services.js';

export interface AppDeps {
  config: Config;
  /** The services of this app's database pool, built by the composition root (main.ts, the tests' harness). */
  services: Services;
  /** The pool requests use: /readyz pings it, the read cache hears its writes. */
  database: Database;
  /** This process's metrics registry (GET /metrics); requests are counted there. */
  metrics: Metrics;
  /** The Bearer token of /admin/v1 (from config or generated into DATA_DIR). */
  adminToken: string;
  /** Pino options, or false for no logs (tests). */
  logger?: FastifyServerOptions['logger'];
  /** Shared rate-limit store (REDIS_URL). */
  redis?: Redis;
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** Appends an onRequest hook to every route of a scope, after hooks that plugins (rate limit) added. */
function appendOnRequest(scope: FastifyInstance, hook: Hook) {
  scope.addHook('onRoute', (route) => {
    const existing = route.onRequest ? [route.onRequest].flat() : [];
    route.onRequest = [...existing, hook] as typeof route.onRequest;
  });
}

const HEALTH_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A URL the router cannot take (bad percent-encoding, an over-long path parameter) never reaches a
 * route, so no hook runs: render the usual JSON error (G7, G8) and do what the hooks would have done
 * (echo the request id, log the completion).
 */
function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  reply.raw.once('finish', () => request.log.info({ res: reply }, 'request completed'));
  reply.header('x-request-id', request.id);
  return errorHandler(error, request, reply);
}

/** TRUST_PROXY as Fastify takes it: a list, or a hop count as proxy-addr's (address, hop) test. */
function trustProxyOption(trust: Config['trustProxy']) {
  if (trust === null) return false;
  if (typeof trust === 'number') return (_address: string, hop: number) => hop < trust;
  return trust;
}

/** The one place the HTTP application is assembled; everything comes in through `deps`. */
export async function buildApp(deps: AppDeps) {
  const { config, database, services, metrics } = deps;
  // Issue 20: header/request timeouts, a clean 408, and a refused body read before its 413.
  const edge = httpEdge(config.http);
  const app = Fastify({
    logger: deps.logger ?? false,
    ...edge.serverOptions,
    bodyLimit: config.bodyLimitBytes,
    // TRUST_PROXY: only these load balancers' X-Forwarded-* are believed (request.ip, protocol, host).
    trustProxy: trustProxyOption(config.trustProxy),
    // REQUEST_TIMEOUT_MS (off by default): a last guard; a request then answers 503 with Retry-After.
    ...(config.requestTimeoutMs > 0 && { handlerTimeout: config.requestTimeoutMs }),
    // x-request-id is accepted (when well-formed) and echoed; otherwise a fresh uuid.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: {
      customOptions: { allErrors: true, removeAdditional: 'all', coerceTypes: 'array', useDefaults: true },
    },
    // Issue 14: each route's validators and serializers compile on its first request, not at start.
    schemaController: lazySchemaCompilers(),
    routerOptions: { maxParamLength: 200 },
    // Issue 29: no pino child per request unless a line is written (http/request-logger.ts).
    childLoggerFactory: requestLoggerFactory,
    frameworkErrors: frameworkErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();
  edge.install(app);

  // Every method and URL the app registers (test/api/security.test.ts checks each one is in its table).
  const routes: { method: string; url: string }[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });

  app.setErrorHandler(errorHandler);
  // Only JSON bodies are accepted: anything else is a 415 (G1).
  app.removeContentTypeParser('text/plain');
  // Issue 13: invalid UTF-8, NUL, lone surrogates and non-finite numbers are a 400, in one place.
  installInputGuard(app);
  app.decorateRequest('caller', null);
  app.decorateRequest('readCache', null);
  app.decorateRequest('bodyValidUntil', null);
  app.decorateRequest('idempotency', null);
  app.decorateRequest('audit', null);
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });
  app.addHook('onSend', etagHook);

  // Requests by route pattern (never the raw URL: ids would make a series each), and database errors.
  // A callback hook (issue 29): an async one costs a promise on every request.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.observeRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  app.addHook('onError', async (_request, _reply, error) => {
    metrics.databaseError(error);
  });

  await app.register(swagger, openapiOptions(config));
  // Issue 20: hostplane_password_hashes_total and the sign-ins refused before a hash.
  metrics.observeAuth(services.authenticator.stats);
  metrics.observeCredentials(services.credentialGate.stats);
  // Issue 31: the SSH gateway runs with the driver (serve or worker), counted where it runs.
  if (services.sshAccess) metrics.observeSsh(services.sshAccess.stats);

  // One per app: the rate limiter's key and the auth hook read a connection's header once (decision 218).
  const credentialOf = connectionCredentials(services.authenticator);
  if (config.rateLimitPerMinute > 0) {
    await app.register(rateLimit, {
      global: true,
      max: config.rateLimitPerMinute,
      timeWindow: 60_000,
      enableDraftSpec: true,
      ...(deps.redis && { redis: deps.redis }),
      // Fail open: when Redis is down, requests are served rather than refused (docs/decisions.md).
      skipOnError: true,
      // G9: per credential once it is verified (a cache hit, no hashing before the limit check);
      // everything else, wrong passwords included, per client IP. Keying an unverified username
      // would let anyone who knows it use up that user's budget.
      keyGenerator: (request) => {
        const pair = credentialOf(request);
        const caller = pair ? services.authenticator.cachedByKey(pair.key) : null;
        if (!caller) return `ip:${request.ip}`;
        request.caller = caller;
        return `cred:${caller.username}`;
      },
      // By route, not by raw URL: `/healthz?probe=1` is still a health probe.
      allowList: (request) => HEALTH_ROUTES.has(request.routeOptions.url ?? ''),
      errorResponseBuilder: (_request, context) =>
        Errors.rateLimited(Math.max(1, Math.ceil(context.ttl / 1000))),
    });
  }

  // Unknown routes: 404 JSON, rate limited like the rest (G9 headers on every response).
  app.setNotFoundHandler(
    config.rateLimitPerMinute > 0 ? { preHandler: app.rateLimit() } : {},
    notFoundHandler,
  );

  // Issue 14: rendered bodies of the listed GETs, never stale (http/read-cache.ts).
  const readCache =
    config.readCache.entries > 0
      ? createReadCache({
          authenticator: services.authenticator,
          clock: services.clock,
          publicUrl: config.publicUrl,
          entries: config.readCache.entries,
          bytes: config.readCache.bytes,
          writes: database.writes ?? null,
        })
      : null;

  const ctx: MountContext = {
    config,
    services,
    metrics,
    databaseReady: boundedCheck(() => ping(database.db), probeTimeoutMs(config.dbBudget)),
    openapi: () => app.swagger(),
  };
  // Issue 22: Idempotency-Key on every POST, PATCH and DELETE behind a credential, per caller.
  const idempotency = (scopeOf: (request: FastifyRequest) => string) => ({
    store: services.idempotency,
    scopeOf,
    onOutcome: metrics.idempotency,
  });
  // Issue 22: every POST, PUT, PATCH and DELETE is recorded in the audit log (after Idempotency-Key:
  // a replay is not a second call).
  const audit = (actorOf: AuditOptions['actorOf']): AuditOptions => ({
    store: services.audit,
    actorOf,
    onOutcome: metrics.audit,
  });
  // The table of every route (routes.ts); each guard sets up its group's scope.
  await registerRoutes(app, ctx, {
    public: () => {},
    basic: (v1) => {
      // Added per route, after the rate limiter's own hook, so failed logins are rate limited too.
      appendOnRequest(v1, basicAuthHook(services.authenticator, services.credentialGate, credentialOf));
      if (readCache) cacheListedGets(v1, readCache);
      useIdempotencyKeys(
        v1,
        idempotency((request) => {
          // Issue 22: keys are per credential: a scoped credential's are its own.
          const caller = callerOf(request);
          return caller.credential ? `credential:${caller.credential.id}` : `user:${caller.userId}`;
        }),
      );
      useAuditLog(
        v1,
        audit((request) => {
          const caller = callerOf(request);
          return { type: 'user', userId: caller.userId, credentialId: caller.credential?.id ?? null };
        }),
      );
    },
    // Issue 30: a hosting server's credential, checked on every request (revocation is immediate).
    agent: (agent) => {
      appendOnRequest(agent, async (request) => {
        request.agentServer = await services.servers.authenticate(request.headers.authorization);
      });
    },
    admin: (admin) => {
      appendOnRequest(admin, adminAuthHook(deps.adminToken, config.adminTokenPrevious));
      useIdempotencyKeys(
        admin,
        idempotency(() => 'admin'),
      );
      useAuditLog(
        admin,
        audit(() => ({ type: 'admin', userId: null, credentialId: null })),
      );
    },
  });

  return Object.assign(app, { services, routes, readCache, metrics }) as typeof app & {
    services: Services;
    /** The read cache (null when READ_CACHE_ENTRIES=0). */
    readCache: ReadCache | null;
    metrics: Metrics;
    routes: readonly { method: string; url: string }[];
  };
}

/** The read cache in front of the GETs `CACHED_OPERATIONS` lists (by operationId), in this scope. */
function cacheListedGets(scope: FastifyInstance, cache: ReadCache) {
  scope.addHook('onRoute', (route) => {
    const operationId = (route.schema as { operationId?: string } | undefined)?.operationId;
    if (route.method !== 'GET' || !operationId || !CACHED_OPERATIONS.has(operationId)) return;
    route.preHandler = [...(route.preHandler ? [route.preHandler].flat() : []), cache.preHandler];
    route.onSend = [...(route.onSend ? [route.onSend].flat() : []), cache.onSend] as typeof route.onSend;
  });
}

export type App = Awaited<ReturnType<typeof buildApp>>;
export type { FastifyInstance };

/**
 * What a `hostplane worker` process serves when METRICS_PORT is set: its metrics (its jobs are
 * counted there) and the probes, nothing else.
 */
export async function buildProbeApp(
  deps: Pick<AppDeps, 'config' | 'database' | 'logger'> & { metrics: Metrics },
) {
  const edge = httpEdge(deps.config.http);
  const app = Fastify({
    logger: deps.logger ?? false,
    ...edge.serverOptions,
  }).withTypeProvider<TypeBoxTypeProvider>();
  edge.install(app);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  // Issue 20 defect 4: the worker's ping runs on the background pool (long budgets): bounded here.
  const ready = boundedCheck(() => ping(deps.database.db), probeTimeoutMs(deps.config.dbBudget));
  await app.register(healthRoutes(ready));
  await app.register(metricsRoutes(deps.metrics, deps.config.metricsToken));
  return app;
}
