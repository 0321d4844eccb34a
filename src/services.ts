import path from 'node:path';
import { createAuthenticator } from './auth/authenticator.js';
import { createCredentialGate } from './auth/credentials.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import type { DriverOperation, HostingDriver } from './drivers/driver.js';
import { createMariaDb } from './drivers/local/database.js';
import { createLocalDriver } from './drivers/local/driver.js';
import type { Sshd } from './drivers/local/sshd.js';
import { createSimulatedDriver } from './drivers/simulated/driver.js';
import { createFaultsService, takeInjectedFault } from './drivers/simulated/faults.js';
import { createRemoteDriver } from './fleet/remote-driver.js';
import type { JobHandlers } from './jobs/catalog.js';
import { nextDue, sweepDue } from './jobs/due.js';
import type { JobQueue } from './jobs/queue.js';
import { createMailer, type Mailer } from './mail/mailer.js';
import { createOutbox } from './mail/outbox.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { createAdminService } from './modules/admin/admin.service.js';
import { createArchivesService } from './modules/archives/archives.service.js';
import { createAuditService } from './modules/audit/audit.service.js';
import { createBackupJobs } from './modules/backups/backups.jobs.js';
import { createBackupsService } from './modules/backups/backups.service.js';
import { createCacheJobs } from './modules/cache/cache.jobs.js';
import { createCacheService } from './modules/cache/cache.service.js';
import { extraTrustedRoots, trustedRootsWith } from './modules/certificates/certificate-chain.js';
import { createCertificateExpiryJob } from './modules/certificates/certificates.expiry.js';
import { createCertificateOrders } from './modules/certificates/certificates.order.service.js';
import {
  createCertificateCoverage,
  createCertificatesService,
} from './modules/certificates/certificates.service.js';
import { createCredentialsService } from './modules/credentials/credentials.service.js';
import { createStatusResolver } from './modules/domains/dns-status.js';
import { createDomainsService } from './modules/domains/domains.service.js';
import {
  createDomainStatusJobs,
  createDomainStatusService,
} from './modules/domains/domains.status.service.js';
import { createTxtResolver } from './modules/domains/txt-resolver.js';
import { createEventsService } from './modules/events/events.service.js';
import { createWebhooksService } from './modules/events/webhooks.service.js';
import { createIdempotencyService } from './modules/idempotency/idempotency.service.js';
import { createInstallCopyService } from './modules/installs/installs.copy.service.js';
import {
  createDeprovisioning,
  createDeprovisionJob,
  createInstallJobs,
  createProvisioning,
} from './modules/installs/installs.jobs.js';
import { createInstallsService } from './modules/installs/installs.service.js';
import { createOffloadService } from './modules/offload/offload.service.js';
import { createOperationRecords, createOperationsService } from './modules/operations/operations.service.js';
import { createReportJobs } from './modules/reports/reports.jobs.js';
import { createReportsService } from './modules/reports/reports.service.js';
import {
  createRoutingJob,
  createRoutingRequests,
  createRoutingState,
} from './modules/routing/routing.service.js';
import { createFleetCalls } from './modules/servers/servers.calls.service.js';
import { createDriftRepair } from './modules/servers/servers.drift.service.js';
import { createMoveJob } from './modules/servers/servers.moves.jobs.js';
import { createMovesService, refuseDeleteWhileMoving } from './modules/servers/servers.moves.service.js';
import { createServersService } from './modules/servers/servers.service.js';
import { createSignInService } from './modules/sign-in/sign-in.service.js';
import { createSiteTransferJobs } from './modules/site-transfers/site-transfers.jobs.js';
import { createSiteTransfersService } from './modules/site-transfers/site-transfers.service.js';
import { createSitesService } from './modules/sites/sites.service.js';
import {
  createAgentSshService,
  createSshAccessService,
  databaseAuthority,
} from './modules/ssh-access/ssh-access.service.js';
import { createSshKeysService } from './modules/ssh-keys/ssh-keys.service.js';
import { createAccountUsageService } from './modules/usage/usage.account.service.js';
import { createUsageJobs } from './modules/usage/usage.jobs.js';
import { createUsageService } from './modules/usage/usage.service.js';
import { createAccountUsersService } from './modules/users/users.account-users.service.js';
import { createUsersService } from './modules/users/users.service.js';
import { createSecretBox, createSigner } from './secrets.js';

export interface ServiceDeps {
  config: Config;
  database: Database;
  clock: Clock;
  /** HOSTPLANE_SECRET_KEY (from config, or generated into DATA_DIR by the caller). */
  secretKey: string;
  /** The started job queue (jobs/queue.ts): services enqueue inside their transactions. */
  queue: JobQueue;
  /** Default: the driver the config names (the simulated one). */
  driver?: HostingDriver;
  /** Default: SMTP when SMTP_URL is set, else mail is kept in the outbox. */
  mailer?: Mailer;
}

/**
 * The composition root: wires every module's service from its narrow dependencies, in dependency
 * order (no module reads globals, nothing is bound late), and maps every job of the catalog to its
 * handler for the worker (`jobHandlers`).
 */
export function createServices({ config, database, clock, secretKey, queue, driver, mailer }: ServiceDeps) {
  const db = database.db;
  const { hashConcurrency, hashQueue, hashCost, ...failures } = config.authLimits;
  const authenticator = createAuthenticator({
    db,
    clock,
    cacheSeconds: config.authCacheSeconds,
    hashing: { concurrency: hashConcurrency, queue: hashQueue },
    failures,
    hashCost,
  });
  // Issue 22: scoped credentials' expiry, IP allow-list and last use (per process).
  const credentialGate = createCredentialGate({ db, clock });
  const credentials = createCredentialsService({ db, clock, authenticator, gate: credentialGate });
  // Issue 22: the audit log of every mutating call (http/audit.ts).
  const audit = createAuditService({ db, clock });
  const accounts = createAccountsService({ db });
  const sites = createSitesService({ db, accounts });
  // Issue 30: hosting servers and the calls routed to their agents (HOSTING_DRIVER=fleet).
  const servers = createServersService({ db, clock, queue, fleet: config.fleet });
  const fleetCalls = createFleetCalls({
    db,
    clock,
    queue,
    secretBox: createSecretBox(secretKey, config.secretKeyOld),
    fleet: config.fleet,
    archiveDir: path.join(config.dataDir, 'fleet-archives'),
  });
  const made = driver
    ? null
    : config.driver.kind === 'fleet'
      ? { driver: createRemoteDriver(fleetCalls), sshd: null }
      : configuredDriver({ config, db, clock, secretKey });
  const hosting = driver ?? (made?.driver as HostingDriver);
  // Issue 31: with SSH_PORT, the key lookups, login records and session reaper of the driver's sshd.
  const sshAccess = made?.sshd
    ? createSshAccessService({ sshd: made.sshd, authority: databaseAuthority({ db, clock, audit }) })
    : null;
  // Issue 31 with several servers: what each hosting server's agent asks about SSH (decision 200).
  const agentSsh = createAgentSshService({ db, clock, audit });
  const outbox = createOutbox({ db, queue, mailer: mailer ?? createMailer(config), clock });
  // Issue 22: events are recorded in the transactions of the state changes (below them all).
  const events = createEventsService({ db, clock, queue });
  const secretBox = createSecretBox(secretKey, config.secretKeyOld);
  const webhooks = createWebhooksService({
    db,
    clock,
    queue,
    outbox,
    secretBox,
    allowedNetworks: config.webhooks.allowedNetworks,
    dns: config.dns,
    timeoutMs: config.webhooks.timeoutMs,
  });
  // I7: creating an install starts its provisioning operation, which needs operation records only
  // (the operations service reads installs, so it comes after them).
  const operationRecords = createOperationRecords({ clock, queue });
  const startProvisioning = createProvisioning({ operations: operationRecords, driver: hosting });
  const { installDomain } = config;
  const startDeprovisioning = createDeprovisioning({ queue });
  const installs = createInstallsService({
    db,
    accounts,
    sites,
    installDomain,
    startProvisioning,
    startDeprovisioning,
    // Issue 30 (decision #214): no delete while the install is being moved between servers.
    assertDeletable: refuseDeleteWhileMoving,
    events,
  });
  const operations = createOperationsService({ db, clock, installs, outbox, queue, events, secretBox });
  const backups = createBackupsService({ db, clock, installs, operations, driver: hosting });
  const installCopy = createInstallCopyService({ db, installs, operations, driver: hosting });
  const usage = createUsageService({ db, clock, installs, operations, driver: hosting });
  const usageAccounts = createAccountUsageService({ db, clock, accounts });
  const cache = createCacheService({ db, clock, installs, operations, driver: hosting });
  const signIn = createSignInService({ db, clock, installs, driver: hosting });
  const users = createUsersService({ db, accounts, authenticator });
  const admin = createAdminService({ accounts, sites, installs, users });
  // Issue 11: account users with invitations, SSH keys.
  const accountUsers = createAccountUsersService({ db, clock, outbox, authenticator, events });
  const sshKeys = createSshKeysService({ db, clock });
  const resolver = createTxtResolver(config.dns);
  // Domain records show the SSL status certificates give them, and certificates check domains: the
  // status part of certificates needs no domains, so it comes first.
  const { sslStatusOf } = createCertificateCoverage({ db, clock });
  // Issue 21: domain and certificate changes start the install's apply_routing operation.
  const requestRouting = createRoutingRequests({ operations: operationRecords, driver: hosting });
  // Issue 30: a server block an agent found gone is routed again (decision #212).
  const driftRepair = createDriftRepair({ db, requestRouting });
  const domains = createDomainsService({
    db,
    clock,
    installs,
    resolver,
    installDomain,
    sslStatusOf,
    requestRouting,
    events,
  });
  const trustedRoots = trustedRootsWith(extraTrustedRoots(config.extraCaCertsFile));
  const certificates = createCertificatesService({
    db,
    clock,
    installs,
    domains,
    secretBox,
    trustedRoots,
    requestRouting,
  });
  // Issue 13: domain status reports (checkStatus), a job of their own.
  const statusDeps = {
    db,
    clock,
    installs,
    queue,
    resolver: createStatusResolver(config.dns),
    installDomain: config.installDomain,
  };
  const domainStatus = createDomainStatusService(statusDeps);
  const domainStatusJobs = createDomainStatusJobs(statusDeps);
  const certificateOrders = createCertificateOrders({
    db,
    installs,
    domains,
    operations,
    certificates,
    driver: hosting,
    renewOrdered: hosting.name === 'local',
  });
  const installJobs = createInstallJobs({
    operations,
    installs,
    driver: hosting,
    routeProvisioned: domains.routeProvisioned,
    requestRouting,
    sourceNames: async (installId: string) => (await domains.routesOf(installId)).map((d) => d.name),
  });
  // An install's routing state; frozen while its move makes its final copy (issue 30).
  const routingState = { domains, certificates, installDomain, frozen: servers.isFrozen };
  const routingJob = createRoutingJob({ ...routingState, installs, operations, driver: hosting });
  // Issue 30: moves of installs between hosting servers, and drains.
  const movesDeps = {
    db,
    clock,
    fleet: config.fleet,
    operations,
    installs,
    calls: fleetCalls,
    backups,
    requestRouting,
    routingOf: createRoutingState(routingState),
    estimateSeconds: (operation: Parameters<HostingDriver['estimateSeconds']>[0]) =>
      hosting.estimateSeconds(operation),
  };
  const moves = createMovesService(movesDeps);
  const backupJobs = createBackupJobs({ operations, backups, installs, driver: hosting, requestRouting });
  const usageJobs = createUsageJobs({ operations, installs, usage, driver: hosting, clock, db });
  const cacheJobs = createCacheJobs({ operations, driver: hosting });
  const reportJobs = createReportJobs({
    db,
    clock,
    outbox,
    publicUrl: config.publicUrl,
    events,
  });
  // Site transfers (issue 11): T1-T11.
  const siteTransfers = createSiteTransfersService({
    db,
    clock,
    sites,
    operations,
    driver: hosting,
    outbox,
  });
  const onMoved = () => authenticator.invalidate();
  const siteTransferJobs = createSiteTransferJobs({
    operations,
    transfers: siteTransfers,
    driver: hosting,
    clock,
    membershipsChanged: (tx) => authenticator.membershipsChanged(tx),
    onMoved,
  });
  /** The worker's handler of every job of the catalog (jobs/catalog.ts). */
  const jobHandlers: JobHandlers = {
    provision_install: installJobs.provision,
    copy_install: installJobs.copy,
    deprovision_install: createDeprovisionJob({ driver: hosting }),
    create_backup: backupJobs.create,
    restore_backup: backupJobs.restore,
    refresh_disk_usage: usageJobs.refresh,
    'usage-traffic-roll': usageJobs.rollTraffic,
    purge_cache: cacheJobs.purge,
    move_install: createMoveJob(movesDeps),
    transfer_site: siteTransferJobs.transfer,
    'mail-deliver': {
      run: ({ message_id }) => outbox.deliver(message_id),
      exhausted: ({ message_id }, error) => outbox.giveUp(message_id, error),
    },
    'site-report-generate': reportJobs.generate,
    // Issue 13.
    'domain-status-check': domainStatusJobs.check,
    order_certificate: certificateOrders.job,
    apply_routing: routingJob,
    'webhook-deliver': {
      run: ({ delivery_id }) => webhooks.deliver(delivery_id),
      exhausted: ({ delivery_id }, error) => webhooks.exhausted(delivery_id, error),
    },
    renew_certificate: certificateOrders.renewJob,
    'certificate-expiring': createCertificateExpiryJob({ db, clock, installs, events }),
    verify_domain: domains.verifyJob,
  };
  /** Due work (jobs/due.ts): the sweeper of workers, and the admin clock after a move. */
  // The 30-day sweep of events rides on the due-work sweeper (at most once a minute).
  const due = {
    sweep: async () => {
      await events.sweep().catch(() => 0);
      return sweepDue(db, queue, clock);
    },
    next: () => nextDue(db),
  };
  const faults = createFaultsService({ db, clock });
  const reports = createReportsService({ db, clock, sites });
  // Issue 13: the rest of the platform's surface.
  const offload = createOffloadService({
    db,
    clock,
    installs,
    signer: createSigner(secretKey, 'largefs-validation'),
  });
  const archives = createArchivesService({
    db,
    clock,
    installs,
    driver: hosting,
    signer: createSigner(secretKey, 'archive-download'),
  });
  // Issue 22: Idempotency-Key claims and stored responses (used by the HTTP hooks, http/idempotency.ts).
  const idempotency = createIdempotencyService({
    db,
    clock,
    secretBox,
    ttlHours: config.idempotencyTtlHours,
  });
  return {
    clock,
    authenticator,
    credentialGate,
    credentials,
    audit,
    idempotency,
    events,
    webhooks,
    accounts,
    sites,
    installs,
    users,
    accountUsers,
    sshKeys,
    admin,
    domains,
    certificates,
    operations,
    backups,
    installCopy,
    usage,
    usageAccounts,
    cache,
    signIn,
    reports,
    siteTransfers,
    outbox,
    servers,
    fleetCalls,
    moves,
    agentSsh,
    driftRepair,
    driver: hosting,
    /** Closes what the services opened for the driver (the local driver's MariaDB pool), not an injected one. */
    closeDriver: async () => {
      await fleetCalls.close();
      await sshAccess?.close();
      await made?.driver.close?.();
    },
    sshAccess,
    faults,
    due,
    /** Issue 21: a roll-up of the server's access logs due now (serve/worker start). */
    scheduleTrafficRoll: usageJobs.scheduleTrafficRoll,
    jobHandlers,
    offload,
    archives,
    domainStatus,
    certificateOrders,
  };
}

export type Services = ReturnType<typeof createServices>;

/**
 * The driver HOSTING_DRIVER names: the simulated one (default) or the local one (issue 16); `fleet`
 * is made above (issue 30). `hostplane agent` runs this one for its own server's calls.
 */
export function configuredDriver({
  config,
  db,
  clock,
  secretKey,
}: Pick<ServiceDeps, 'config' | 'clock' | 'secretKey'> & { db: Database['db'] }): {
  driver: HostingDriver;
  sshd: Sshd | null;
} {
  const secretBox = createSecretBox(secretKey, config.secretKeyOld);
  const simulated = createSimulatedDriver({ db, clock, durations: config.driver.durations, secretBox });
  const local = config.driver.local;
  if (config.driver.kind !== 'local' || !local) return { driver: simulated, sshd: null };
  const driver = createLocalDriver({
    db,
    clock,
    secretBox,
    mariadb: createMariaDb(local.mariadbUrl),
    hostingRoot: local.hostingRoot,
    maxHeavy: local.maxHeavyOperations,
    web: local.web && { ...local.web, installDomain: config.installDomain },
    ssh: local.ssh,
    acme: local.acme,
    ...(config.faultsEnabled && {
      midway: (operation: DriverOperation, signal: AbortSignal) => takeInjectedFault(db, operation, signal),
    }),
  });
  return { driver, sshd: driver.sshd };
}
