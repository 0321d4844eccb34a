import type { Static } from 'typebox';
import type { AccountsService } from '../accounts/accounts.service.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { SitesService } from '../sites/sites.service.js';
import type { UsersService } from '../users/users.service.js';
import type { SeedFixture } from './admin.schemas.js';

export interface AdminDeps {
  accounts: Pick<AccountsService, 'create'>;
  sites: Pick<SitesService, 'adminCreate'>;
  installs: Pick<InstallsService, 'adminCreate'>;
  users: Pick<UsersService, 'create' | 'issueCredential'>;
}

export interface DemoCredentials {
  accountId: string;
  username: string;
  password: string;
}

export function createAdminService({ accounts, sites, installs, users }: AdminDeps) {
  return {
    /**
     * Loads a fixture item by item, in dependency order (accounts, sites, installs, users). It is not
     * one transaction: a failure names the item, and what came before it stays.
     */
    async seed(fixture: Static<typeof SeedFixture>) {
      const counts = { accounts: 0, sites: 0, installs: 0, users: 0, credentials: 0 };
      const step = async <T>(what: string, index: number, fn: () => Promise<T>) => {
        try {
          return await fn();
        } catch (err) {
          throw new Error(`seed: ${what}[${index}]: ${(err as Error).message}`, { cause: err });
        }
      };
      for (const [i, a] of (fixture.accounts ?? []).entries()) {
        await step('accounts', i, () => accounts.create(a));
        counts.accounts++;
      }
      for (const [i, s] of (fixture.sites ?? []).entries()) {
        await step('sites', i, () => sites.adminCreate(s));
        counts.sites++;
      }
      for (const [i, inst] of (fixture.installs ?? []).entries()) {
        await step('installs', i, () => installs.adminCreate(inst));
        counts.installs++;
      }
      for (const [i, u] of (fixture.users ?? []).entries()) {
        const user = await step('users', i, () => users.create(u));
        counts.users++;
        for (const c of u.credentials ?? []) {
          await step('users', i, () => users.issueCredential(user.id, c));
          counts.credentials++;
        }
      }
      return counts;
    },

    /**
     * First start on an empty database: a demo account with a site, an owner credential and an
     * install. The install is provisioned by the hosting driver like any other (issue 29 defect 8):
     * `pending` until its provision_install operation completes, then `active` and, with the local
     * web tier, served; never a row that says active while nothing serves it.
     */
    async createDemo(): Promise<DemoCredentials> {
      const account = await accounts.create({ name: 'Demo Agency', preferred_data_center: 'us-central' });
      const site = await sites.adminCreate({ account_id: account.id, name: 'Demo Site' });
      const user = await users.create({
        email: 'owner@demo.hostplane.test',
        first_name: 'Demo',
        last_name: 'Owner',
        memberships: [{ account_id: account.id, roles: 'owner' }],
      });
      await installs.adminCreate(
        { account_id: account.id, site_id: site.id, name: 'demosite', environment: 'production' },
        { provision: true },
      );
      const credential = await users.issueCredential(user.id);
      return { accountId: account.id, ...credential };
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
