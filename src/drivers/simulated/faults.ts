import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { DRIVER_OPERATIONS, DriverError, type DriverOperation } from '../driver.js';
import * as repo from './simulated.repo.js';

/**
 * Takes the next injected fault of `operation` (POST /admin/v1/faults), if any: `fail` throws, `hang`
 * never answers until the job's expiry aborts it. The local driver takes them half-way through its
 * work, so tests can kill a worker in the middle of a real backup, restore or copy.
 */
export async function takeInjectedFault(db: Db, operation: DriverOperation, signal: AbortSignal) {
  const mode = await repo.takeFault(db, operation);
  if (mode === 'fail') throw new DriverError(operation, `simulated ${operation} failure (injected fault)`);
  if (mode === 'hang') {
    // A hung platform call: it never answers; the job's expiry aborts it.
    await new Promise<never>((_resolve, reject) => {
      const give = () => reject(new DriverError(operation, `simulated ${operation} hung (injected fault)`));
      if (signal.aborted) give();
      else signal.addEventListener('abort', give, { once: true });
    });
  }
}

/** POST /admin/v1/faults (test mode): the next `count` calls of `operation` fail or hang. */
export function createFaultsService({ db, clock }: { db: Db; clock: Clock }) {
  return {
    operations: DRIVER_OPERATIONS,
    async set(input: { operation: DriverOperation; count: number; mode: 'fail' | 'hang' }) {
      await repo.setFault(db, {
        operation: input.operation,
        mode: input.mode,
        remaining: input.count,
        created_at: clock.now(),
      });
      return repo.listFaults(db);
    },
    list: () => repo.listFaults(db),
    countApplied: (installId: string, operation: DriverOperation) =>
      repo.countApplied(db, installId, operation),
  };
}

export type FaultsService = ReturnType<typeof createFaultsService>;
