import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { Errors } from '../../errors.js';
import type { AccountsService } from '../accounts/accounts.service.js';
import * as accountRepo from './usage.account.repo.js';
import * as repo from './usage.repo.js';
import { seriesOf } from './usage.service.js';
import { type Limits, limitsOfPlan } from './usage-limits.js';
import { datesOf, isoDate, resolveRange } from './usage-range.js';
import {
  average,
  METRICS,
  type Metric,
  type Rollup,
  rollupOf,
  STORAGE_METRICS,
  TRAFFIC_METRICS,
} from './usage-values.js';

export interface AccountUsageDeps {
  db: Db;
  clock: Clock;
  accounts: Pick<AccountsService, 'find'>;
}

type RangeQuery = { first_date?: string; last_date?: string };
const ENVIRONMENTS = ['production', 'staging', 'development'] as const;
const SITE_TYPES = ['standard', 'transferable', 'sandbox'] as const;

/** G4/A2: the installs of the account the caller sees (partial members: their install_ids). */
function scopeOf(caller: Caller, accountId: string): repo.Scope {
  const membership = requireAccount(caller, accountId, 'account:read');
  return { accountId, installIds: membership.installIds === null ? null : [...membership.installIds] };
}

type Breakdown = {
  total: string | null;
  environment_types: Record<(typeof ENVIRONMENTS)[number], string | null>;
  site_types: Record<(typeof SITE_TYPES)[number], string | null>;
};

/** M5: the GROUPING SETS rows as one UsageMetricBreakdown per metric. */
function breakdowns(rows: accountRepo.InsightRow[]) {
  const total = rows.find((r) => r.g_env === 1 && r.g_site === 1);
  const env = (name: string) => rows.find((r) => r.g_env === 0 && r.environment === name);
  const site = (name: string) => rows.find((r) => r.g_site === 0 && r.site_type === name);
  const pick = <K extends string>(
    names: readonly K[],
    of: (n: K) => accountRepo.InsightRow | undefined,
    m: Metric,
  ) => Object.fromEntries(names.map((n) => [n, of(n)?.[m] ?? null])) as Record<K, string | null>;
  return Object.fromEntries(
    METRICS.map((m) => [
      m,
      {
        total: total?.[m] ?? null,
        environment_types: pick(ENVIRONMENTS, env, m),
        site_types: pick(SITE_TYPES, site, m),
      },
    ]),
  ) as Record<Metric, Breakdown>;
}

/** M6: the summary row as one UsageRollup per metric. */
function rollups(row: accountRepo.SummaryRow): Record<Metric, Rollup> {
  const out = {} as Record<Metric, Rollup>;
  for (const m of TRAFFIC_METRICS) {
    const sum = row[`${m}_sum`];
    const days = Number(row[`${m}_days`] ?? 0);
    out[m] =
      typeof sum === 'string' && days > 0
        ? { sum, average: average(BigInt(sum), days).toString(), latest: null }
        : { sum: null, average: null, latest: null };
  }
  for (const m of STORAGE_METRICS) {
    const value = row[`${m}_latest`];
    const date = row[`${m}_date`];
    out[m] = {
      sum: null,
      average: null,
      latest: typeof value === 'string' && typeof date === 'string' ? { date, value } : null,
    };
  }
  return out;
}

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;

export function createAccountUsageService({ db, clock, accounts }: AccountUsageDeps) {
  return {
    /** getAccountUsageInsights (M1-M5). */
    async insights(caller: Caller, accountId: string, query: RangeQuery) {
      const scope = scopeOf(caller, accountId);
      const range = resolveRange(query, clock.now());
      return breakdowns(await accountRepo.insights(db, scope, range.first, range.last));
    },

    /** getAccountUsageSummary (M1-M4, M6). */
    async summary(caller: Caller, accountId: string, query: RangeQuery) {
      const scope = scopeOf(caller, accountId);
      const range = resolveRange(query, clock.now());
      return rollups(await accountRepo.summary(db, scope, range.first, range.last));
    },

    /** getAccountUsageMetrics: a page of environments, each with its daily series and rollup. */
    async accountUsage(
      caller: Caller,
      accountId: string,
      query: RangeQuery & { limit?: number; offset?: string },
    ) {
      const scope = scopeOf(caller, accountId);
      const now = clock.now();
      const range = resolveRange(query, now);
      const limit = query.limit ?? 100;
      const offset = Number(query.offset ?? 0);
      const page = await accountRepo.pageOfInstalls(db, scope, limit, offset);
      const ids = page.rows.map((r) => r.id);
      const [rows, seeds, times, account] = [
        await repo.listDailyOf(db, ids, range.first, range.last),
        await repo.storageBefore(db, ids, range.first),
        await accountRepo.refreshTimes(db, scope, ids),
        (await accountRepo.refreshTimes(db, scope, null))[0],
      ];
      const dates = datesOf(range);
      const today = isoDate(now);
      const expected = (t: accountRepo.RefreshTimes | undefined) =>
        t?.pending ? iso(t.expected_at ?? now) : null;
      return {
        first_date: range.first,
        last_date: range.last,
        environment_metrics: page.rows.map((install) => {
          const days = seriesOf(
            dates,
            rows.filter((r) => r.install_id === install.id),
            seeds.find((s) => s.install_id === install.id),
            today,
          );
          const t = times.find((x) => x.install_id === install.id);
          return {
            install_id: install.id,
            environment_name: install.name,
            metrics: [...days].reverse(),
            metrics_rollup: rollupOf(days),
            storage_refresh_expected_time: expected(t),
            storage_update_time: iso(t?.completed_at),
          };
        }),
        total_size: page.total,
        next_page_token: offset + limit < page.total ? String(offset + limit) : null,
        all_environments_included: scope.installIds === null,
        last_account_storage_refresh_time: iso(account?.completed_at),
        account_storage_refresh_expected_time: expected(account),
      };
    },

    /** getAccountsLimits: the operator's limits of the account, else its plan's. */
    async limits(caller: Caller, accountId: string): Promise<Limits> {
      requireAccount(caller, accountId, 'account:read');
      return (await accountRepo.limitsOverride(db, accountId)) ?? limitsOf(await accounts.find(accountId));
    },

    /** PUT /admin/v1/accounts/{id}/limits: the account's own limits, replacing the plan's. */
    async setLimits(accountId: string, limits: Limits): Promise<Limits> {
      if (!(await accounts.find(accountId))) throw Errors.notFound();
      await accountRepo.putLimitsOverride(db, accountId, limits, clock.now());
      return limits;
    },

    /** DELETE /admin/v1/accounts/{id}/limits: back to the plan's limits. */
    async resetLimits(accountId: string): Promise<Limits> {
      const account = await accounts.find(accountId);
      if (!account) throw Errors.notFound();
      await accountRepo.deleteLimitsOverride(db, accountId);
      return limitsOf(account);
    },
  };
}

function limitsOf(account: { plan: string } | null): Limits {
  if (!account) throw Errors.notFound();
  return limitsOfPlan(account.plan);
}

export type AccountUsageService = ReturnType<typeof createAccountUsageService>;
