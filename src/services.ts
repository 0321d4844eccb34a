import { createAuthenticator } from './auth/authenticator.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { createAdminService } from './modules/admin/admin.service.js';
import { systemTrustedRoots } from './modules/certificates/certificate-chain.js';
import { createCertificatesService } from './modules/certificates/certificates.service.js';
import { createDomainsService } from './modules/domains/domains.service.js';
import { createTxtResolver } from './modules/domains/txt-resolver.js';
import { createInstallsService } from './modules/installs/installs.service.js';
import { createSitesService } from './modules/sites/sites.service.js';
import { createUsersService } from './modules/users/users.service.js';
import { createSecretBox } from './secrets.js';

export interface ServiceDeps {
  config: Config;
  database: Database;
  clock: Clock;
  /** HOSTPLANE_SECRET_KEY (from config, or generated into DATA_DIR by the caller). */
  secretKey: string;
}

/** Wires every module's service from its narrow dependencies (no module reads globals). */
export function createServices({ config, database, clock, secretKey }: ServiceDeps) {
  const db = database.db;
  const authenticator = createAuthenticator({ db, clock, cacheSeconds: config.authCacheSeconds });
  const accounts = createAccountsService({ db });
  const sites = createSitesService({ db, accounts });
  const installs = createInstallsService({ db, accounts, sites, installDomain: config.installDomain });
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
  return { authenticator, accounts, sites, installs, users, admin, domains, certificates };
}

export type Services = ReturnType<typeof createServices>;
