import { createAuthenticator } from './auth/authenticator.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import type { HostingDriver } from './drivers/driver.js';
import { createFaultsService, createSimulatedDriver } from './drivers/simulated.js';
import { nextDue, sweepDue } from './jobs/due.js';
import type { JobQueue } from './jobs/queue.js';
import { createMailer, type Mailer } from './mail/mailer.js';
import { createOutbox } from './mail/outbox.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { createAdminService } from './modules/admin/admin.service.js';
import { createBackupJobs } from './modules/backups/backups.jobs.js';
import { createBackupsService } from './modules/backups/backups.service.js';
import { createCacheJobs } from './modules/cache/cache.jobs.js';
import { createCacheService } from './modules/cache/cache.service.js';
import { systemTrustedRoots } from './modules/certificates/certificate-chain.js';
import { createCertificatesService } from './modules/certificates/certificates.service.js';
import { createDomainsService } from './modules/domains/domains.service.js';
import { createTxtResolver } from './modules/domains/txt-resolver.js';
import { createInstallCopyService } from './modules/installs/installs.copy.service.js';
import { createInstallJobs } from './modules/installs/installs.jobs.js';
import { createInstallsService } from './modules/installs/installs.service.js';
import { createOperationsService } from './modules/operations/operations.service.js';
import { createSitesService } from './modules/sites/sites.service.js';
import { createUsageJobs } from './modules/usage/usage.jobs.js';
import { createUsageService } from './modules/usage/usage.service.js';
import { createUsersService } from './modules/users/users.service.js';
import { createSecretBox } from './secrets.js';

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

/** Wires every module's service from its narrow dependencies (no module reads globals). */
export function createServices({ config, database, clock, secretKey, queue, driver, mailer }: ServiceDeps) {
  const db = database.db;
  const authenticator = createAuthenticator({ db, clock, cacheSeconds: config.authCacheSeconds });
  const accounts = createAccountsService({ db });
  const sites = createSitesService({ db, accounts });
  const hosting = driver ?? createSimulatedDriver({ db, clock, durations: config.driver.durations });
  const outbox = createOutbox({ db, queue, mailer: mailer ?? createMailer(config), clock });
  // Provisioning needs operations, which need installs: bound once both exist (I7).
  let installJobs: ReturnType<typeof createInstallJobs> | null = null;
  const installs = createInstallsService({
    db,
    accounts,
    sites,
    installDomain: config.installDomain,
    startProvisioning: (tx, install) => {
      if (!installJobs) throw new Error('services are not wired yet');
      return installJobs.startProvisioning(tx, install);
    },
  });
  const operations = createOperationsService({ db, clock, installs, outbox });
  installJobs = createInstallJobs({ operations, installs, queue, driver: hosting });
  const backups = createBackupsService({ db, clock, installs, operations, queue, driver: hosting });
  const installCopy = createInstallCopyService({ db, installs, operations, queue, driver: hosting });
  const usage = createUsageService({ db, clock, installs, operations, queue, driver: hosting });
  const cache = createCacheService({ db, clock, installs, operations, queue, driver: hosting });
  const users = createUsersService({ db, accounts, authenticator });
  const admin = createAdminService({ accounts, sites, installs, users });
  const resolver = createTxtResolver(config.dns);
  // Domain records show SSL status and certificates check domains: the first call binds late.
  const sslStatusOf = (installId: string, names: string[]) => certificates.sslStatusOf(installId, names);
  const { installDomain } = config;
  const domains = createDomainsService({ db, clock, installs, resolver, installDomain, sslStatusOf });
  const secretBox = createSecretBox(secretKey);
  const trustedRoots = systemTrustedRoots;
  const certificates = createCertificatesService({ db, clock, installs, domains, secretBox, trustedRoots });
  const jobHandlers = {
    installs: installJobs,
    backups: createBackupJobs({ operations, backups, installs, driver: hosting }),
    usage: createUsageJobs({ operations, installs, usage, driver: hosting, clock }),
    cache: createCacheJobs({ operations, driver: hosting }),
  };
  /** Due work (jobs/due.ts): the sweeper of workers, and the admin clock after a move. */
  const due = { sweep: () => sweepDue(db, queue, clock), next: () => nextDue(db) };
  const faults = createFaultsService({ db, clock });
  return {
    clock,
    authenticator,
    accounts,
    sites,
    installs,
    users,
    admin,
    domains,
    certificates,
    operations,
    backups,
    installCopy,
    usage,
    cache,
    outbox,
    driver: hosting,
    faults,
    due,
    jobHandlers,
  };
}

export type Services = ReturnType<typeof createServices>;
