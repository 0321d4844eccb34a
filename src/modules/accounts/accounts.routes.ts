import { callerOf } from '../../http/auth.js';
import { envelope, PageQuery, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { AccountList, AccountParams, AccountSchema } from './accounts.schemas.js';

/** The platform's Account requires `nickname`; a Hostplane account has one name, so it is both. */
const toAccount = (row: { id: string; name: string }) => ({ id: row.id, name: row.name, nickname: row.name });

export function accountsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/accounts',
      {
        schema: {
          operationId: 'listAccounts',
          tags: ['Accounts'],
          summary: 'List the accounts the caller belongs to',
          querystring: PageQuery,
          response: { 200: AccountList, ...errorResponses(400) },
        },
        config: { resource: 'account' },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.accounts.list(callerOf(request), page);
        return envelope(request, config.publicUrl, page, count, rows.map(toAccount));
      },
    );

    app.get(
      '/accounts/:account_id',
      {
        schema: {
          operationId: 'getAccount',
          tags: ['Accounts'],
          summary: 'Get one account',
          params: AccountParams,
          response: { 200: AccountSchema, ...errorResponses(400, 403, 404) },
        },
        config: { resource: 'account' },
      },
      async (request) => toAccount(await services.accounts.get(callerOf(request), request.params.account_id)),
    );
  };
}
