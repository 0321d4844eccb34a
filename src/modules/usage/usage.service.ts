import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { HostingDriver, TrafficDay } from '../../drivers/driver.js';
import { Errors, type FieldError } from '../../errors.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationRow, OperationsService } from '../operations/operations.service.js';
import * as repo from './usage.repo.js';
import { datesOf, isoDate, resolveRange } from './usage-range.js';
import {
  type Day,
  fillStorage,
  METRICS,
  type Metric,
  parseValue,
  rollupOf,
  type Values,
} from './usage-values.js';

export interface UsageDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lockProvisioned' | 'list'>;
  operations: Pick<OperationsService, 'startUnlessOpen' | 'openOfType' | 'lastCompleted'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

/** At most this many field errors in one 400 of the ingest (a bad file would list thousands). */
const MAX_REPORTED_ERRORS = 20;

/**
 * The days of a range (oldest first) from the stored rows, with storage filled from the last known
 * figures (before the range: `seed`) up to today. Days without a row have every metric null.
 */
export function seriesOf(
  dates: string[],
  rows: repo.DailyRow[],
  seed: Partial<repo.StorageSeed> | undefined,
  today: string,
): Day[] {
  const byDate = new Map(rows.map((r) => [r.date, r]));
  const days = dates.map((date) => {
    const row = byDate.get(date);
    const values = Object.fromEntries(METRICS.map((m) => [m, row?.[m] ?? null])) as Values;
    return { date, ...values };
  });
  return fillStorage(days, seed ?? {}, today);
}

/** POST /admin/v1/usage rows as the schema let them through (metric values still unchecked). */
export type IngestInput = { install_id: string; date: string } & Partial<Record<Metric, unknown>>;

function validateIngest(rows: IngestInput[]): { parsed: repo.IngestRow[]; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const seen = new Map<string, number>();
  const error = (field: string, message: string, code = 'invalid_value') =>
    errors.push({ resource: 'usage', field, type: 'invalid_value', code, message });
  const parsed = rows.map((row, i) => {
    const key = `${row.install_id}/${row.date}`;
    const earlier = seen.get(key);
    if (earlier !== undefined) error(`rows[${i}].date`, `rows[${earlier}] has the same install and date`);
    seen.set(key, i);
    const values: Partial<Values> = {};
    for (const m of METRICS) {
      if (!(m in row)) continue;
      const result = parseValue(row[m]);
      if ('problem' in result) error(`rows[${i}].${m}`, `${m} ${result.problem}`);
      else values[m] = result.ok;
    }
    return { install_id: row.install_id, date: row.date, values };
  });
  return { parsed, errors };
}

export function createUsageService({ db, clock, installs, operations, driver }: UsageDeps) {
  /**
   * M7, M8: one pending recalculation per install; a request while one is pending joins it. The
   * install's lock orders requests, not the worker: the open refresh a request collided with may
   * complete before the request reads it (issue 15's concurrency trials found the 500 this was).
   * Then the request starts the next refresh: it asks again, a bounded number of times.
   */
  async function refresh(installId: string): Promise<OperationRow> {
    // A request that finds a refresh open joins it without queueing for the install's lock (a burst
    // of refreshes of one install otherwise waits in line on it, each past the request's budget).
    const open = await operations.openOfType(installId, 'refresh_disk_usage');
    if (open) return open;
    return withTransaction(db, async (tx) => {
      const install = await installs.lockProvisioned(tx, installId);
      for (let attempt = 0; attempt < 5; attempt++) {
        const created = await operations.startUnlessOpen(tx, {
          install,
          type: 'refresh_disk_usage',
          resource: { type: 'install', id: install.id },
          input: {},
          expectedSeconds: driver.estimateSeconds('measure_disk'),
        });
        if (created) return created;
        const pending = await operations.openOfType(install.id, 'refresh_disk_usage', tx);
        if (pending) return pending;
      }
      throw new Error('disk refreshes of one install kept completing under a new request');
    });
  }

  return {
    /** refreshEnvironmentDiskUsage: 200 with a null body (M7); the operation for the Location header. */
    async refreshInstall(caller: Caller, installId: string) {
      await installs.requireInstall(caller, installId, 'installs:operate');
      return refresh(installId);
    },

    /** Every active install of the account the caller sees: each collapses like a single refresh (M8). */
    async refreshAccount(caller: Caller, accountId: string) {
      requireAccount(caller, accountId, 'usage:account');
      const { rows } = await installs.list(caller, { limit: 100_000, offset: 0 }, accountId);
      const active = rows.filter((r) => r.status === 'active');
      for (const install of active) await refresh(install.id);
      return active.length;
    },

    /** getInstallUsageMetrics (M1-M4, M9): the range's days, most recent first, and their rollup. */
    async installUsage(
      caller: Caller,
      installId: string,
      query: { first_date?: string; last_date?: string },
    ) {
      const install = await installs.requireInstall(caller, installId, 'installs:read');
      const now = clock.now();
      const range = resolveRange(query, now);
      const rows = await repo.listDaily(db, installId, range.first, range.last);
      const [seed] = await repo.storageBefore(db, [installId], range.first);
      const days = seriesOf(datesOf(range), rows, seed, isoDate(now));
      const pending = await operations.openOfType(installId, 'refresh_disk_usage');
      const updated = await operations.lastCompleted(installId, 'refresh_disk_usage');
      return {
        install_id: installId,
        install_name: install.name,
        first_date: range.first,
        last_date: range.last,
        metrics: [...days].reverse(),
        metrics_rollup: rollupOf(days),
        storage_refresh_expected_time: pending ? (pending.expected_at ?? now).toISOString() : null,
        storage_update_time: updated?.toISOString() ?? null,
      };
    },

    /**
     * POST /admin/v1/usage: validate every row (values, duplicates, install ids), then upsert them in
     * one transaction; a 400 lists the first problems by row index and changes nothing.
     */
    async ingest(rows: IngestInput[]) {
      const { parsed, errors } = validateIngest(rows);
      const ids = [...new Set(parsed.map((r) => r.install_id))];
      const known = await repo.existingInstalls(db, ids);
      parsed.forEach((r, i) => {
        if (known.has(r.install_id)) return;
        errors.push({
          resource: 'usage',
          field: `rows[${i}].install_id`,
          type: 'invalid_value',
          code: 'unknown_install',
          message: `No install ${r.install_id}`,
        });
      });
      if (errors.length > 0) {
        const shown = errors.slice(0, MAX_REPORTED_ERRORS);
        const more = errors.length > shown.length ? ` (the first ${shown.length} of ${errors.length})` : '';
        throw Errors.badRequest(`${errors.length} problem(s) in rows${more}; nothing was stored`, shown);
      }
      await withTransaction(db, (tx) => repo.ingest(tx, parsed));
      return { rows: parsed.length };
    },

    /**
     * Issue 21, usage from the server: an install's days as its access log counted them (absolute
     * totals: storing them again is harmless). An install deleted since is skipped.
     */
    async recordTraffic(installId: string, days: TrafficDay[]) {
      if (!(await repo.existingInstalls(db, [installId])).has(installId)) return;
      await withTransaction(db, (tx) =>
        repo.ingest(
          tx,
          days.map((d) => ({
            install_id: installId,
            date: d.date,
            values: {
              visit_count: String(d.visits),
              request_origin_count: String(d.origin_requests),
              network_origin_bytes: String(d.origin_bytes),
              network_total_bytes: String(d.total_bytes),
            },
          })),
        ),
      );
    },

    /** For the job: the day's storage metrics from a finished measurement. */
    recordStorage: (
      tx: Db,
      installId: string,
      at: Date,
      usage: { file_bytes: number; database_bytes: number },
    ) =>
      repo.upsertStorage(tx, installId, isoDate(at), {
        storage_file_bytes: String(usage.file_bytes),
        storage_database_bytes: String(usage.database_bytes),
      }),
  };
}

export type UsageService = ReturnType<typeof createUsageService>;
