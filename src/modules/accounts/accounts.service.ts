import { type Caller, memberAccountIds, requireAccount } from '../../auth/access.js';
import type { Db } from '../../db/client.js';
import { Errors } from '../../errors.js';
import type { Page } from '../../http/pagination.js';
import * as repo from './accounts.repo.js';

export function createAccountsService({ db }: { db: Db }) {
  return {
    async list(caller: Caller, page: Page) {
      return repo.listAccounts(db, memberAccountIds(caller), page);
    },
    async get(caller: Caller, accountId: string) {
      requireAccount(caller, accountId, 'account:read');
      const account = await repo.findAccount(db, accountId);
      if (!account) throw Errors.notFound();
      return account;
    },
    /** For the admin API. */
    create: (values: Parameters<typeof repo.insertAccount>[1]) => repo.insertAccount(db, values),
    /** For other modules: the account row, no access check (the caller checks). */
    find: (accountId: string, tx: Db = db) => repo.findAccount(tx, accountId),
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
