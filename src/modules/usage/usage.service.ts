import { type Caller, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { HostingDriver } from '../../drivers/driver.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationRow, OperationsService } from '../operations/operations.service.js';
import * as repo from './usage.repo.js';
import { METRICS } from './usage.schemas.js';
import { datesOf, isoDate, resolveRange } from './usage-range.js';

export interface UsageDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lockProvisioned' | 'list'>;
  operations: Pick<OperationsService, 'createUnlessOpen' | 'openOfType' | 'lastCompleted'>;
  queue: Pick<JobQueue, 'enqueue'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

const metric = (value: number | null) => (value === null ? null : String(value));

export function createUsageService({ db, clock, installs, operations, queue, driver }: UsageDeps) {
  /** M7, M8: one pending recalculation per install; a request while one is pending joins it. */
  async function refresh(installId: string): Promise<OperationRow> {
    return withTransaction(db, async (tx) => {
      const install = await installs.lockProvisioned(tx, installId);
      const created = await operations.createUnlessOpen(tx, {
        install,
        type: 'refresh_disk_usage',
        resource: { type: 'install', id: install.id },
        expectedSeconds: driver.estimateSeconds('measure_disk'),
      });
      if (created) {
        await queue.enqueue(tx, 'disk-usage-refresh', { operation_id: created.id });
        return created;
      }
      const pending = await operations.openOfType(install.id, 'refresh_disk_usage', tx);
      if (!pending) throw new Error('a pending disk refresh vanished inside its lock');
      return pending;
    });
  }

  return {
    /** refreshEnvironmentDiskUsage: 200 with a null body (M7); the operation for the Location header. */
    async refreshInstall(caller: Caller, installId: string) {
      await installs.requireInstall(caller, installId, 'installs:operate');
      return refresh(installId);
    },

    /** Every active install of the account the caller sees: each collapses like a single refresh. */
    async refreshAccount(caller: Caller, accountId: string) {
      requireAccount(caller, accountId, 'usage:account');
      const { rows } = await installs.list(caller, { limit: 100_000, offset: 0 }, accountId);
      const active = rows.filter((r) => r.status === 'active');
      for (const install of active) await refresh(install.id);
      return active.length;
    },

    /** M9: daily metrics of the range, and the refresh times. */
    async installUsage(
      caller: Caller,
      installId: string,
      query: { first_date?: string; last_date?: string },
    ) {
      await installs.requireInstall(caller, installId, 'installs:read');
      const range = resolveRange(query, clock.now());
      const rows = new Map(
        (await repo.listDaily(db, installId, range.first, range.last)).map((r) => [r.date, r]),
      );
      const pending = await operations.openOfType(installId, 'refresh_disk_usage');
      const updated = await operations.lastCompleted(installId, 'refresh_disk_usage');
      return {
        install_id: installId,
        first_date: range.first,
        last_date: range.last,
        metrics: datesOf(range).map((date) => {
          const row = rows.get(date);
          const values = Object.fromEntries(METRICS.map((m) => [m, metric(row?.[m] ?? null)]));
          return { date, ...(values as Record<(typeof METRICS)[number], string | null>) };
        }),
        storage_refresh_expected_time: pending ? (pending.expected_at ?? clock.now()).toISOString() : null,
        storage_update_time: updated?.toISOString() ?? null,
      };
    },

    /** For the job: the day's storage metrics from a finished measurement. */
    recordStorage: (
      tx: Db,
      installId: string,
      at: Date,
      usage: { file_bytes: number; database_bytes: number },
    ) =>
      repo.upsertStorage(tx, installId, isoDate(at), {
        storage_file_bytes: usage.file_bytes,
        storage_database_bytes: usage.database_bytes,
      }),
  };
}

export type UsageService = ReturnType<typeof createUsageService>;
