import type { HostingDriver } from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { inputOf, type OperationsService } from '../operations/operations.service.js';

export interface CacheJobsDeps {
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail'>;
  driver: HostingDriver;
}

/** The purge_cache job. */
export function createCacheJobs({ operations, driver }: CacheJobsDeps) {
  const purge: JobHandler<{ operation_id: string }> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      // Cache purges are always of an install (install_id is null only for site-level work).
      if (!op?.install_id) return;
      const { type } = inputOf(op, 'purge_cache');
      const result = await driver.purgeCache(
        { key: op.id, signal: ctx.signal },
        { install_id: op.install_id, type },
      );
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async () => undefined);
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(operation_id, `The cache purge failed: ${error}`, async () => undefined);
    },
  };
  return { purge };
}
