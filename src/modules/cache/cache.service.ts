import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { HostingDriver } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationsService } from '../operations/operations.service.js';

/** One purge per install and cache type in this window. */
export const PURGE_WINDOW_SECONDS = 60;

export interface CacheDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lockProvisioned'>;
  operations: Pick<OperationsService, 'start' | 'latestSince'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

export function createCacheService({ db, clock, installs, operations, driver }: CacheDeps) {
  return {
    /** purge_cache: 202 with its operation, or 429 when this cache was purged less than 60 s ago. */
    async purge(caller: Caller, installId: string, type: 'object' | 'page' | 'cdn') {
      await installs.requireInstall(caller, installId, 'installs:operate');
      return withTransaction(db, async (tx) => {
        const install = await installs.lockProvisioned(tx, installId);
        const now = clock.now();
        const since = new Date(now.getTime() - PURGE_WINDOW_SECONDS * 1000);
        const recent = await operations.latestSince(tx, install.id, 'purge_cache', since, {
          key: 'type',
          value: type,
        });
        if (recent) {
          const retryAfter = Math.max(
            1,
            Math.ceil((recent.created_at.getTime() + PURGE_WINDOW_SECONDS * 1000 - now.getTime()) / 1000),
          );
          throw Errors.tooManyRequests(
            `The ${type} cache of install ${install.name} was purged at ${recent.created_at.toISOString()}; ` +
              `one purge per cache type every ${PURGE_WINDOW_SECONDS} seconds, retry in ${retryAfter} seconds`,
            retryAfter,
          );
        }
        return operations.start(tx, {
          install,
          type: 'purge_cache',
          resource: { type: 'install', id: install.id },
          input: { type },
          expectedSeconds: driver.estimateSeconds('purge_cache'),
        });
      });
    },
  };
}

export type CacheService = ReturnType<typeof createCacheService>;
