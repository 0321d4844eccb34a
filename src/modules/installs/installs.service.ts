import { type Caller, can, requireInstall } from '../../auth/access.js';
import { visibleInstalls } from '../../auth/visibility.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import type { EventRecorder } from '../events/events.service.js';
import { assertProvisioned } from '../operations/operations.service.js';
import type { SitesService } from '../sites/sites.service.js';
import * as repo from './installs.repo.js';

export interface InstallsDeps {
  db: Db;
  accounts: Pick<AccountsService, 'find'>;
  sites: Pick<SitesService, 'lockSite'>;
  /** Installs get the cname and first primary domain `<name>.<installDomain>`. */
  installDomain: string;
  /**
   * I7: called in the transaction that creates an install through the API, which is `pending`
   * until the provisioning job this starts makes it `active`. Default: none (the install is active).
   */
  startProvisioning?: (tx: Db, install: repo.InstallRow) => Promise<void>;
  /**
   * Called in the transaction that deletes an install: queues the driver's deprovisioning (files,
   * database, backups on the platform). Default: none.
   */
  startDeprovisioning?: (tx: Db, installId: string) => Promise<void>;
  /**
   * Issue 30 (decision #214): called in the transaction that deletes an install, its row locked,
   * before the delete: throws to refuse it (409 while the install is being moved between servers).
   */
  assertDeletable?: (tx: Db, install: { id: string; name: string }) => Promise<void>;
  /** Issue 22: `install.deleted`, in the transaction that deletes the install. */
  events?: EventRecorder;
}

/**
 * Defaults of an install loaded by the admin API or seeding (it exists already, nothing provisions
 * it). An install created through the API has no WordPress version until its provisioning reports
 * the one its files hold (issue 29 defect 9: never an invented one).
 */
export const DEFAULT_PHP_VERSION = '8.2';
export const DEFAULT_WP_VERSION = '6.7.1';
/** I9: the plans whose installs can have stable IPs. */
export const PLANS_WITH_STABLE_IPS = ['premium', 'enterprise'];

export interface CreateInstallInput {
  name: string;
  account_id: string;
  site_id?: string | null;
  environment?: string | null;
}

export interface AdminCreateInstallInput extends CreateInstallInput {
  id?: string;
  status?: string;
  php_version?: string;
  wp_version?: string;
}

function translateUniqueViolation(err: unknown, name: string, environment: string | null | undefined): never {
  const state = sqlState(err);
  if (state?.code === '23505' && state.constraint === 'installs_name_key') throw nameUnavailable(name);
  if (state?.code === '23505' && state.constraint === 'installs_site_environment_key') {
    throw environmentUnavailable(environment ?? '');
  }
  throw err;
}

const nameUnavailable = (name: string) =>
  Errors.valueUnavailable('install', 'name', `Install name "${name}" is already taken`, 'name_taken');
const environmentUnavailable = (environment: string, holder?: string) =>
  Errors.valueUnavailable(
    'install',
    'environment',
    `The site already has a ${environment} install${holder ? ` (${holder})` : ''}`,
    'environment_taken',
  );

/** I7/G12: an install still being provisioned is busy: a 400 naming why, on `field`. */
export function createInstallsService({
  db,
  accounts,
  sites,
  installDomain,
  startProvisioning,
  startDeprovisioning,
  assertDeletable,
  events,
}: InstallsDeps) {
  /** I4/I5: the target site must be in the account, and its environment slot free. */
  async function checkPlacement(
    tx: Db,
    accountId: string,
    siteId: string,
    environment: string | null | undefined,
    installId?: string,
  ) {
    const site = await sites.lockSite(tx, siteId);
    if (!site || site.account_id !== accountId) {
      throw Errors.invalidValue('install', 'site_id', `Site ${siteId} is not a site of account ${accountId}`);
    }
    if (environment) {
      const holder = await repo.occupant(tx, siteId, environment, installId);
      if (holder) throw environmentUnavailable(environment, holder.name);
    }
  }

  /**
   * I2-I5 and the insert itself, shared by createInstall and the admin API. Through the API (with
   * `provision`) the install starts `pending` and a provisioning job makes it `active` (I7); the
   * admin API and seeding load installs that already exist, so they are `active` unless told.
   */
  async function insert(input: AdminCreateInstallInput, provision = false) {
    const account = await accounts.find(input.account_id);
    if (!account)
      throw Errors.accessError('install', 'account_id', `Account ${input.account_id} does not exist`);
    if (account.sites_enabled) {
      // I3: both are required for accounts with sites enabled.
      if (!input.site_id)
        throw Errors.invalidValue('install', 'site_id', 'site_id is required for this account');
      if (!input.environment) {
        throw Errors.invalidValue('install', 'environment', 'environment is required for this account');
      }
    } else if (input.site_id || input.environment) {
      const field = input.site_id ? 'site_id' : 'environment';
      throw Errors.invalidValue('install', field, `Account ${input.account_id} does not have sites enabled`);
    }
    try {
      return await withTransaction(db, async (tx) => {
        if (await repo.nameTaken(tx, input.name)) throw nameUnavailable(input.name);
        if (input.site_id) await checkPlacement(tx, input.account_id, input.site_id, input.environment);
        const provisioned = provision && startProvisioning !== undefined;
        const row = await repo.insertInstall(tx, {
          ...(input.id && { id: input.id }),
          account_id: input.account_id,
          site_id: input.site_id ?? null,
          environment: input.environment ?? null,
          name: input.name,
          status: provisioned ? 'pending' : (input.status ?? 'active'),
          php_version: input.php_version ?? DEFAULT_PHP_VERSION,
          wp_version: provisioned ? null : (input.wp_version ?? DEFAULT_WP_VERSION),
          primary_domain: `${input.name}.${installDomain}`,
        });
        if (provisioned) await startProvisioning(tx, row);
        return row;
      });
    } catch (err) {
      translateUniqueViolation(err, input.name, input.environment);
    }
  }

  async function find(caller: Caller, installId: string, action: Parameters<typeof requireInstall>[2]) {
    const install = await repo.findInstall(db, installId);
    if (!install) throw Errors.notFound();
    requireInstall(caller, install, action);
    return install;
  }

  return {
    /** For other modules: the install if the caller may do `action` on it (404/403 otherwise). */
    requireInstall: find,

    async list(caller: Caller, page: Page, accountId?: string) {
      return repo.listInstalls(db, visibleInstalls(caller, accountId), page);
    },

    get: (caller: Caller, installId: string) => find(caller, installId, 'installs:read'),

    /** I1-I5: createInstall. The spec lists no 404, so an account the caller cannot use is a 400 access_error. */
    async create(caller: Caller, input: CreateInstallInput) {
      const membership = caller.memberships.get(input.account_id);
      if (!membership) {
        throw Errors.accessError(
          'install',
          'account_id',
          `Account ${input.account_id} does not exist or is not accessible`,
        );
      }
      if (!can(membership, 'installs:create')) throw Errors.forbidden();
      return insert(input, true);
    },

    /**
     * For the admin API and seeding: the same rules, no caller. `provision`: the install is made by
     * the hosting driver (pending until its provisioning operation completes), as through the API.
     */
    adminCreate: (input: AdminCreateInstallInput, options: { provision?: boolean } = {}) =>
      insert(input, options.provision ?? false),

    /** I6: move an install to another site and/or environment, under I4 and I5. */
    async update(
      caller: Caller,
      installId: string,
      input: { site_id?: string; environment?: string | null },
    ) {
      const install = await find(caller, installId, 'installs:update');
      if (input.site_id === undefined && input.environment === undefined) return install;
      const account = await accounts.find(install.account_id);
      if (!account?.sites_enabled) {
        // I3 (decision): no site and no environment here; a null environment changes nothing.
        if (input.site_id === undefined && input.environment === null) return install;
        const field = input.site_id !== undefined ? 'site_id' : 'environment';
        throw Errors.invalidValue(
          'install',
          field,
          `Account ${install.account_id} does not have sites enabled`,
        );
      }
      const siteId = input.site_id ?? install.site_id;
      const environment = input.environment !== undefined ? input.environment : install.environment;
      // I3 (decision): an install of an account with sites keeps a site and an environment.
      if (!environment)
        throw Errors.invalidValue('install', 'environment', 'environment is required for this account');
      try {
        return await withTransaction(db, async (tx) => {
          if (siteId) await checkPlacement(tx, install.account_id, siteId, environment, install.id);
          const row = await repo.updateInstall(tx, installId, { site_id: siteId, environment });
          if (!row) throw Errors.notFound();
          return row;
        });
      } catch (err) {
        translateUniqueViolation(err, install.name, environment);
      }
    },

    /** Deletes the install and, through foreign keys, its child records; the platform's copy follows (a job). */
    /**
     * Issue 22, `?dry_run=true`: the checks of `remove` and what it would do, changing nothing (no
     * row, no job). The install's domains, its cname included, would stop serving.
     */
    async removeDryRun(caller: Caller, installId: string) {
      const install = await find(caller, installId, 'installs:delete');
      if (assertDeletable) await withTransaction(db, (tx) => assertDeletable(tx, install));
      const names = await repo.domainNames(db, installId);
      const cname = `${install.name}.${installDomain}`;
      return {
        dry_run: true as const,
        install_id: install.id,
        operation: startDeprovisioning ? 'deprovision_install' : null,
        domains_that_would_stop_serving: [...new Set([cname, ...names])],
      };
    },

    async remove(caller: Caller, installId: string) {
      const install = await find(caller, installId, 'installs:delete');
      await withTransaction(db, async (tx) => {
        if (assertDeletable) {
          if (!(await repo.lockInstall(tx, installId))) throw Errors.notFound();
          await assertDeletable(tx, install);
        }
        if (!(await repo.deleteInstall(tx, installId))) throw Errors.notFound();
        await startDeprovisioning?.(tx, installId);
        await events?.record(tx, {
          account_id: install.account_id,
          install_id: install.id,
          type: 'install.deleted',
          resource: { type: 'install', id: install.id },
          data: {
            install_id: install.id,
            name: install.name,
            site_id: install.site_id,
            environment: install.environment,
          },
        });
      });
    },

    /** D4, for the domains module inside its transaction: null puts back the install's cname. */
    setPrimaryDomain: (tx: Db, installId: string, name: string | null) =>
      repo.setPrimaryDomain(tx, installId, name, installDomain),

    /** For the admin API and other modules: no caller checks. */
    findById: async (installId: string | null, tx: Db = db) =>
      installId === null ? null : repo.findInstall(tx, installId),
    /** For other modules, in their transaction: the install locked (operations on it serialise). */
    lock: (tx: Db, installId: string) => repo.lockInstall(tx, installId),
    /** For operations on an install, in their transaction: locked, 404 if gone, 400 while provisioning. */
    async lockProvisioned(tx: Db, installId: string) {
      const install = await repo.lockInstall(tx, installId);
      if (!install) throw Errors.notFound();
      assertProvisioned(install);
      return install;
    },
    /** For job handlers, in their transaction: what provisioning, a copy or a restore changed (I7). */
    async applySoftware(
      tx: Db,
      installId: string,
      values: { status?: 'active'; wp_version?: string | null; php_version?: string | null },
    ) {
      return repo.updateInstall(tx, installId, values);
    },
    /** For the admin API. I9: stable IPs only on plans that have them. */
    async adminUpdate(
      installId: string,
      values: { status?: string; wp_version?: string | null; stable_ips?: string[] | null },
    ) {
      const install = await repo.findInstall(db, installId);
      if (!install) throw Errors.notFound();
      if (values.stable_ips) {
        const plan = (await accounts.find(install.account_id))?.plan ?? '';
        if (!PLANS_WITH_STABLE_IPS.includes(plan)) {
          throw Errors.invalidValue('install', 'stable_ips', `Plan "${plan}" has no stable IPs`);
        }
      }
      const row = await repo.updateInstall(db, installId, values);
      if (!row) throw Errors.notFound();
      return row;
    },
  };
}

export type InstallsService = ReturnType<typeof createInstallsService>;
/** The install row other modules see (the repository stays private to this module). */
export type { InstallRow } from './installs.repo.js';
