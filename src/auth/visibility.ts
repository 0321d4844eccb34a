import { and, eq, exists, inArray, or, type SQL, sql } from 'drizzle-orm';
import { installs, sites } from '../db/schema.js';
import type { Caller, Membership } from './access.js';

function memberships(caller: Caller, accountId?: string): Membership[] {
  return [...caller.memberships.values()].filter((m) => !accountId || m.accountId === accountId);
}

const NOTHING = sql`false`;

/** A2 in SQL: the installs a caller sees (every install of its accounts; partial members their install_ids). */
export function visibleInstalls(caller: Caller, accountId?: string): SQL {
  const parts = memberships(caller, accountId).map((m) =>
    m.installIds === null
      ? eq(installs.account_id, m.accountId)
      : m.installIds.size === 0
        ? NOTHING
        : and(eq(installs.account_id, m.accountId), inArray(installs.id, [...m.installIds])),
  );
  return or(...parts) ?? NOTHING;
}

/** A2 in SQL: the sites a caller sees (partial members only the sites that hold one of their installs). */
export function visibleSites(caller: Caller, accountId?: string): SQL {
  const parts = memberships(caller, accountId).map((m) =>
    m.installIds === null
      ? eq(sites.account_id, m.accountId)
      : m.installIds.size === 0
        ? NOTHING
        : and(
            eq(sites.account_id, m.accountId),
            exists(
              sql`(select 1 from ${installs} where ${installs.site_id} = ${sites.id} and ${inArray(installs.id, [...m.installIds])})`,
            ),
          ),
  );
  return or(...parts) ?? NOTHING;
}
