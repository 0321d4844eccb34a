import type { Clock } from '../../clock.js';
import { type HostingDriver, installRef } from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationsService } from '../operations/operations.service.js';
import type { UsageService } from './usage.service.js';

export interface UsageJobsDeps {
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail'>;
  installs: Pick<InstallsService, 'findById'>;
  usage: Pick<UsageService, 'recordStorage'>;
  driver: HostingDriver;
  clock: Clock;
}

/** The refresh_disk_usage job: measure, then record the day's storage bytes (M7-M9). */
export function createUsageJobs({ operations, installs, usage, driver, clock }: UsageJobsDeps) {
  const refresh: JobHandler<{ operation_id: string }> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      if (!op) return;
      const install = await installs.findById(op.install_id);
      if (!install) return;
      const result = await driver.measureDisk({ key: op.id, signal: ctx.signal }, installRef(install));
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async (tx) => {
        await usage.recordStorage(tx, install.id, clock.now(), result.value);
        return undefined;
      });
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(
        operation_id,
        `The disk usage recalculation failed: ${error}`,
        async () => undefined,
      );
    },
  };
  return { refresh };
}
