import { type Caller, memberAccountIds, requireAccount } from '../../auth/access.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import type { Page } from '../../db/page.js';
import { Errors } from '../../errors.js';
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
    async create(values: Parameters<typeof repo.insertAccount>[1]) {
      try {
        return await repo.insertAccount(db, values);
      } catch (err) {
        // An operator may choose the id (to mirror the platform's); a taken one is the caller's error.
        if (sqlState(err)?.code === '23505') {
          throw Errors.valueUnavailable('account', 'id', `An account with id ${values.id} already exists`);
        }
        throw err;
      }
    },
    /** For other modules: the account row, no access check (the caller checks). */
    find: (accountId: string, tx: Db = db) => repo.findAccount(tx, accountId),
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
/** The account row other modules see (the repository stays private to this module). */
export type { AccountRow } from './accounts.repo.js';
