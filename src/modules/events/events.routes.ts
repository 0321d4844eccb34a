import { callerOf } from '../../http/auth.js';
import { baseUrl } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { AccountParams } from '../accounts/accounts.schemas.js';
import { EventList, EventQuery } from './events.schemas.js';
import { toEvent } from './events.service.js';

export function eventsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/accounts/:account_id/events',
      {
        schema: {
          operationId: 'listEvents',
          tags: ['Event'],
          summary: "The account's events of the last 30 days, newest first",
          description:
            'Every state change (backups, restores, copies, installs, transfers, domains, certificates, usage, reports, users, operations). Page with `starting_after` (the last id of a page). Partial members see the events of their installs only.',
          params: AccountParams,
          querystring: EventQuery,
          response: { 200: EventList, ...errorResponses(400, 403, 404) },
        },
        config: { resource: 'event' },
      },
      async (request) => {
        const limit = request.query.limit ?? 50;
        const { rows, hasMore } = await services.events.list(callerOf(request), request.params.account_id, {
          ...request.query,
          limit,
        });
        const last = rows.at(-1);
        let next: string | null = null;
        if (hasMore && last) {
          const url = new URL(request.url, 'http://placeholder');
          url.searchParams.set('starting_after', last.id);
          next = `${baseUrl(request, config.publicUrl)}${url.pathname}${url.search}`;
        }
        return { results: rows.map(toEvent), has_more: hasMore, next };
      },
    );
  };
}
