import { createAuthenticator } from './auth/authenticator.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { createAdminService } from './modules/admin/admin.service.js';
import { createInstallsService } from './modules/installs/installs.service.js';
import { createSitesService } from './modules/sites/sites.service.js';
import { createUsersService } from './modules/users/users.service.js';

export interface ServiceDeps {
  config: Config;
  database: Database;
  clock: Clock;
}

/** Wires every module's service from its narrow dependencies (no module reads globals). */
export function createServices({ config, database, clock }: ServiceDeps) {
  const db = database.db;
  const authenticator = createAuthenticator({ db, clock, cacheSeconds: config.authCacheSeconds });
  const accounts = createAccountsService({ db });
  const sites = createSitesService({ db, accounts });
  const installs = createInstallsService({ db, accounts, sites, installDomain: config.installDomain });
  const users = createUsersService({ db, accounts, authenticator });
  const admin = createAdminService({ accounts, sites, installs, users });
  return { authenticator, accounts, sites, installs, users, admin };
}

export type Services = ReturnType<typeof createServices>;
