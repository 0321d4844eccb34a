import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { HostingDriver } from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import type { OperationsService } from '../operations/operations.service.js';
import type { SiteTransferRunService } from './site-transfers.run.service.js';

export interface SiteTransferJobsDeps {
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail' | 'find'>;
  transfers: Pick<
    SiteTransferRunService,
    'find' | 'start' | 'problemAtRun' | 'installIdsOf' | 'finish' | 'markFailed'
  >;
  driver: Pick<HostingDriver, 'moveSite'>;
  clock: Clock;
  /**
   * The move prunes partial members' install_ids: a membership change. `membershipsChanged` runs in
   * the move's transaction (every process drops its cached callers within a second, decisions.md #7);
   * `onMoved` clears this process's cache once it commits.
   */
  membershipsChanged: (tx: Db) => Promise<void>;
  onMoved: () => void;
}

type OperationPayload = { operation_id: string };

/**
 * The transfer_site job (T9, T11): in_progress, one keyed `move_site` driver call (ask again at T
 * is due work), then the move in one transaction. Each step is safe to run twice; a crash before
 * the final transaction leaves the site where it was, and the retry completes it.
 */
export function createSiteTransferJobs({
  operations,
  transfers,
  driver,
  clock,
  membershipsChanged,
  onMoved,
}: SiteTransferJobsDeps) {
  const transfer: JobHandler<OperationPayload> = {
    async run({ operation_id }, ctx) {
      const queued = await operations.find(operation_id);
      if (!queued) return;
      const row = await transfers.find(queued.resource_id);
      // A scheduled transfer runs at its time, not before (a duplicate or early send waits again).
      if (row?.status === 'scheduled' && row.scheduled_time && row.scheduled_time > clock.now()) {
        return operations.waitUntil(queued, row.scheduled_time);
      }
      const op = await operations.begin(operation_id, async (tx, started) => {
        await transfers.start(tx, started.resource_id);
      });
      if (!op) return;
      const current = await transfers.find(op.resource_id);
      if (current?.status !== 'in_progress') {
        const error = current
          ? `The site transfer is ${current.status}`
          : 'The site transfer no longer exists';
        await operations.fail(op.id, error, async () => undefined);
        return;
      }
      const problem = await transfers.problemAtRun(current);
      if (problem) {
        await operations.fail(op.id, `The site transfer failed: ${problem}`, (tx, locked) =>
          transfers.markFailed(tx, current.id, locked, problem),
        );
        return;
      }
      const result = await driver.moveSite(
        { key: op.id, signal: ctx.signal },
        {
          site_id: current.site_id,
          install_ids: await transfers.installIdsOf(current.site_id),
          destination_account_id: current.destination_account_id,
        },
      );
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      const moved = await operations.complete(op.id, async (tx, locked) => {
        const outcome = await transfers.finish(tx, current.id, locked);
        await membershipsChanged(tx);
        return outcome;
      });
      if (moved) onMoved();
    },
    async exhausted({ operation_id }, error) {
      const message = `The site transfer failed: ${error}`;
      await operations.fail(operation_id, message, (tx, op) =>
        transfers.markFailed(tx, op.resource_id, op, message),
      );
    },
  };
  return { transfer };
}
