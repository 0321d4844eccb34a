import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { type HostingDriver, installRef } from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { rescheduleAt, scheduleAt } from '../../jobs/due.js';
import type { InstallsService } from '../installs/installs.service.js';
import type { OperationsService } from '../operations/operations.service.js';
import type { UsageService } from './usage.service.js';

export interface UsageJobsDeps {
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail'>;
  installs: Pick<InstallsService, 'findById'>;
  usage: Pick<UsageService, 'recordStorage' | 'recordTraffic'>;
  db: Db;
  driver: HostingDriver;
  clock: Clock;
}

/** The refresh_disk_usage job: measure, then record the day's storage bytes (M7-M9). */
/** Seconds between two roll-ups of the server's access logs (issue 21). */
export const TRAFFIC_ROLL_SECONDS = 300;
const TRAFFIC_DUE_KEY = 'usage:traffic-roll';

export function createUsageJobs({ operations, installs, usage, driver, clock, db }: UsageJobsDeps) {
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
  /** Issue 21: the driver's access logs into the daily rows, then the next roll-up as due work. */
  const rollTraffic: JobHandler<Record<string, never>> = {
    async run() {
      if (!driver.collectTraffic) return;
      await driver.collectTraffic((installId, days) => usage.recordTraffic(installId, days), clock.now());
      await rescheduleAt(
        db,
        TRAFFIC_DUE_KEY,
        'usage-traffic-roll',
        {},
        new Date(clock.now().getTime() + TRAFFIC_ROLL_SECONDS * 1000),
      );
    },
    async exhausted() {
      // The next one still comes: the figures are whole days, the next roll-up catches up.
      await rescheduleAt(
        db,
        TRAFFIC_DUE_KEY,
        'usage-traffic-roll',
        {},
        new Date(clock.now().getTime() + TRAFFIC_ROLL_SECONDS * 1000),
      );
    },
  };

  /**
   * At `serve`/`worker` start, and for tests: a roll-up due now (a scheduled one that is later is
   * brought forward; none when the driver keeps no server logs).
   */
  const scheduleTrafficRoll = async () => {
    if (!driver.collectTraffic) return;
    await scheduleAt(db, TRAFFIC_DUE_KEY, 'usage-traffic-roll', {}, clock.now());
  };

  return { refresh, rollTraffic, scheduleTrafficRoll };
}
