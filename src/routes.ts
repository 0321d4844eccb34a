import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Config } from './config.js';
import { accountsRoutes } from './modules/accounts/accounts.routes.js';
import { adminRoutes } from './modules/admin/admin.routes.js';
import { adminTestingRoutes } from './modules/admin/admin.testing.routes.js';
import { archiveDownloadRoutes, archivesRoutes } from './modules/archives/archives.routes.js';
import { auditRoutes } from './modules/audit/audit.routes.js';
import { backupsRoutes } from './modules/backups/backups.routes.js';
import { cacheRoutes } from './modules/cache/cache.routes.js';
import { certificatesRoutes } from './modules/certificates/certificates.routes.js';
import { consoleRoutes } from './modules/console/console.routes.js';
import { credentialsRoutes } from './modules/credentials/credentials.routes.js';
import { domainsRoutes } from './modules/domains/domains.routes.js';
import { domainStatusRoutes } from './modules/domains/domains.status.routes.js';
import { eventsRoutes } from './modules/events/events.routes.js';
import { webhooksRoutes } from './modules/events/webhooks.routes.js';
import { installCopyRoutes } from './modules/installs/installs.copy.routes.js';
import { installsRoutes } from './modules/installs/installs.routes.js';
import { metricsRoutes } from './modules/metrics/metrics.routes.js';
import type { Metrics } from './modules/metrics/metrics.service.js';
import { offloadRoutes } from './modules/offload/offload.routes.js';
import { operationsRoutes } from './modules/operations/operations.routes.js';
import { reportsRoutes } from './modules/reports/reports.routes.js';
import { agentEnrolRoutes, agentRoutes } from './modules/servers/servers.agent.routes.js';
import { movesRoutes } from './modules/servers/servers.moves.routes.js';
import { serversRoutes } from './modules/servers/servers.routes.js';
import { signInRoutes } from './modules/sign-in/sign-in.routes.js';
import { siteTransfersRoutes } from './modules/site-transfers/site-transfers.routes.js';
import { sitesRoutes } from './modules/sites/sites.routes.js';
import { sshKeysRoutes } from './modules/ssh-keys/ssh-keys.routes.js';
import { healthRoutes, publicRoutes } from './modules/system/system.routes.js';
import { usageAdminRoutes, usageRoutes } from './modules/usage/usage.routes.js';
import { accountUsersRoutes, invitationsRoutes } from './modules/users/users.account-users.routes.js';
import { usersRoutes } from './modules/users/users.routes.js';
import type { RouteContext } from './route-context.js';

/** What the table's plugins are built from: the modules' context, plus what the system routes read. */
export interface MountContext extends RouteContext {
  metrics: Metrics;
  /** Asks the app's database (db/client.ts `ping`); throws when it does not answer (/readyz). */
  databaseReady: () => Promise<void>;
  /** The OpenAPI document of the app (GET /v1/swagger). */
  openapi: () => unknown;
}

/**
 * Who may call a group's routes: anyone (`public`), a Basic-auth credential (`basic`: the hook runs
 * per route after the rate limiter's, and the listed GETs use the read cache), the admin token, or
 * a hosting server's agent credential (`agent`, issue 30: only /agent/v1 accepts it).
 */
export type Guard = 'public' | 'basic' | 'admin' | 'agent';

export interface RouteGroup {
  prefix: '' | '/v1' | '/admin/v1' | '/agent/v1';
  guard: Guard;
  plugins: readonly ((ctx: MountContext) => FastifyPluginAsync)[];
}

/**
 * Every route of the API, in registration order (the order of the OpenAPI document). Each group is
 * one encapsulated scope: its guard's hooks apply to its plugins only.
 */
export const ROUTE_TABLE: readonly RouteGroup[] = [
  {
    prefix: '',
    guard: 'public',
    plugins: [
      (ctx) => healthRoutes(ctx.databaseReady),
      (ctx) => metricsRoutes(ctx.metrics, ctx.config.metricsToken),
      () => async (app) => {
        await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: '/v1/swagger' } });
      },
      // Issue 23: the web console's static files (its credential is the API's Basic auth, per call).
      consoleRoutes,
    ],
  },
  {
    prefix: '/v1',
    guard: 'public',
    plugins: [
      (ctx) =>
        publicRoutes(
          () => ctx.openapi(),
          () => ctx.services.clock.now(),
        ),
      // No credentials: the invitation token is the secret (rate limited per client address).
      invitationsRoutes,
    ],
  },
  {
    prefix: '/v1',
    guard: 'basic',
    plugins: [
      accountsRoutes,
      usersRoutes,
      sitesRoutes,
      installsRoutes,
      domainsRoutes,
      certificatesRoutes,
      operationsRoutes,
      installCopyRoutes,
      backupsRoutes,
      usageRoutes,
      cacheRoutes,
      accountUsersRoutes,
      sshKeysRoutes,
      reportsRoutes,
      // Issue 13.
      offloadRoutes,
      archivesRoutes,
      domainStatusRoutes,
      siteTransfersRoutes,
      // Issue 22.
      credentialsRoutes,
      auditRoutes,
      eventsRoutes,
      webhooksRoutes,
      // Issue 29.
      signInRoutes,
    ],
  },
  // Issue 13: signed archive links are their own credential (no Basic auth).
  { prefix: '/v1', guard: 'public', plugins: [archiveDownloadRoutes] },
  {
    prefix: '/admin/v1',
    guard: 'admin',
    // The testing routes are always there: a feature that is off (HOSTPLANE_CLOCK, HOSTPLANE_FAULTS)
    // answers 404 saying how to turn it on.
    plugins: [adminRoutes, adminTestingRoutes, usageAdminRoutes, serversRoutes, movesRoutes],
  },
  // Issue 30: hosting servers' agents. Enrolment's one-time token is its own credential.
  { prefix: '/agent/v1', guard: 'public', plugins: [agentEnrolRoutes] },
  { prefix: '/agent/v1', guard: 'agent', plugins: [agentRoutes] },
];

/** Registers every group of the table, each in its own scope, after `guards[group.guard]` set it up. */
export async function registerRoutes(
  app: FastifyInstance,
  ctx: MountContext,
  guards: Record<Guard, (scope: FastifyInstance) => void>,
) {
  for (const group of ROUTE_TABLE) {
    await app.register(
      async (scope) => {
        guards[group.guard](scope);
        for (const plugin of group.plugins) await scope.register(plugin(ctx));
      },
      { prefix: group.prefix },
    );
  }
}

/** The OpenAPI document's fixed parts (@fastify/swagger). */
export function openapiOptions(config: Config) {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Hostplane: Hosting Management Service Interface',
        version: '1.0.0',
        description: 'Sites, installs, domains, backups, transfers, users and usage of hosting accounts.',
      },
      servers: config.publicUrl ? [{ url: config.publicUrl }] : [],
      components: {
        securitySchemes: {
          basicAuth: { type: 'http' as const, scheme: 'basic' },
          adminToken: { type: 'http' as const, scheme: 'bearer' },
          metricsToken: { type: 'http' as const, scheme: 'bearer' },
          agentCredential: { type: 'http' as const, scheme: 'bearer' },
        },
      },
      security: [{ basicAuth: [] }],
    },
  };
}
