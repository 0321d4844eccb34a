import { type Action, type Caller, can } from '../../auth/access.js';
import { visibleInstalls, visibleSites } from '../../auth/visibility.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import * as repo from './sites.repo.js';

export interface SiteInput {
  name?: string;
  group_name?: string | null;
  tags?: string[];
}

export interface AdminSiteInput extends SiteInput {
  id?: string;
  name: string;
  account_id: string;
  sandbox?: boolean;
  transferable?: boolean;
}

export interface SitesDeps {
  db: Db;
  accounts: Pick<AccountsService, 'find'>;
}

export type SiteWithInstalls = repo.SiteRow & { installs: repo.SiteInstallRow[] };

export function createSitesService({ db, accounts }: SitesDeps) {
  async function withInstalls(caller: Caller, rows: repo.SiteRow[]): Promise<SiteWithInstalls[]> {
    const installs = await repo.installsOfSites(
      db,
      rows.map((r) => r.id),
      visibleInstalls(caller),
    );
    const bySite = new Map<string, repo.SiteInstallRow[]>();
    for (const install of installs) {
      if (!install.site_id) continue;
      const list = bySite.get(install.site_id);
      if (list) list.push(install);
      else bySite.set(install.site_id, [install]);
    }
    return rows.map((row) => ({ ...row, installs: bySite.get(row.id) ?? [] }));
  }

  async function insert(input: AdminSiteInput): Promise<SiteWithInstalls> {
    const account = await accounts.find(input.account_id);
    if (!account)
      throw Errors.accessError('site', 'account_id', `Account ${input.account_id} does not exist`);
    if (!account.sites_enabled) {
      throw Errors.invalidValue(
        'site',
        'account_id',
        `Account ${input.account_id} does not have sites enabled`,
      );
    }
    const row = await repo.insertSite(db, {
      ...(input.id && { id: input.id }),
      account_id: input.account_id,
      name: input.name.trim(),
      group_name: input.group_name ?? null,
      tags: input.tags ?? [],
      sandbox: input.sandbox ?? false,
      transferable: input.transferable ?? true,
    });
    return { ...row, installs: [] };
  }

  /** G3/G4/A2: the site if the caller sees it (partial members: it holds one of their installs). */
  async function requireSite(caller: Caller, siteId: string, action: Action): Promise<SiteWithInstalls> {
    const site = await repo.findSite(db, siteId);
    const membership = site ? caller.memberships.get(site.account_id) : undefined;
    if (!site || !membership) throw Errors.notFound();
    const [full] = await withInstalls(caller, [site]);
    if (!full || (membership.installIds !== null && full.installs.length === 0)) throw Errors.notFound();
    if (!can(membership, action)) throw Errors.forbidden();
    return full;
  }

  return {
    requireSite,

    /** For the admin API: flags only operators set (S4). */
    async adminUpdate(siteId: string, values: { sandbox?: boolean; transferable?: boolean }) {
      const row = await repo.updateSite(db, siteId, values);
      if (!row) throw Errors.notFound();
      return row;
    },

    /** For installs: locks a site row inside the caller's transaction (serialises I4 checks). */
    lockSite: (tx: Db, siteId: string) => repo.lockSite(tx, siteId),

    /** S1: the sites of every account the caller sees, optionally one account (foreign: empty, G12). */
    async list(caller: Caller, page: Page, accountId?: string) {
      return repo.listSitesWithInstalls(db, visibleSites(caller, accountId), visibleInstalls(caller), page);
    },

    get: (caller: Caller, siteId: string) => requireSite(caller, siteId, 'account:read'),

    /** S2: createSite. The spec lists no 404 here, so an account the caller cannot use is a 400 access_error. */
    async create(caller: Caller, input: SiteInput & { name: string; account_id: string }) {
      const membership = caller.memberships.get(input.account_id);
      if (!membership) {
        throw Errors.accessError(
          'site',
          'account_id',
          `Account ${input.account_id} does not exist or is not accessible`,
        );
      }
      if (!can(membership, 'sites:create')) throw Errors.forbidden();
      return insert(input);
    },

    /** For the admin API and seeding: the same rules, no caller. */
    adminCreate: (input: AdminSiteInput) => insert(input),

    async update(caller: Caller, siteId: string, input: SiteInput) {
      const site = await requireSite(caller, siteId, 'sites:update');
      const values = {
        ...(input.name !== undefined && { name: input.name.trim() }),
        ...(input.group_name !== undefined && { group_name: input.group_name }),
        ...(input.tags !== undefined && { tags: input.tags }),
      };
      if (Object.keys(values).length === 0) return site;
      const row = await repo.updateSite(db, siteId, values);
      if (!row) throw Errors.notFound();
      return { ...row, installs: site.installs };
    },

    /** Refuses (400) while the site still holds installs: deleting a site never deletes installs. */
    async remove(caller: Caller, siteId: string) {
      await requireSite(caller, siteId, 'sites:delete');
      await withTransaction(db, async (tx) => {
        const site = await repo.lockSite(tx, siteId);
        if (!site) throw Errors.notFound();
        const installs = await repo.countInstallsOfSite(tx, siteId);
        if (installs > 0) {
          throw Errors.invalidValue(
            'site',
            'site_id',
            `Site ${siteId} still holds ${installs} install(s); delete or move them first`,
            'site_not_empty',
          );
        }
        await repo.deleteSite(tx, siteId);
      });
    },
  };
}

export type SitesService = ReturnType<typeof createSitesService>;
