import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { RequestRouting } from '../routing/routing.service.js';
import * as repo from './servers.repo.js';

/**
 * Issue 30, drift repaired (decision #212): an agent's reconcile finds an install's server block gone
 * (deleted by hand, a disk restored from an old image); its names and certificates live here, so the
 * install's routing is applied again (an `apply_routing` operation, joined while one is queued). Only
 * for installs placed on the reporting server: a server cannot start work for another's installs.
 */
export function createDriftRepair(deps: { db: Db; requestRouting: RequestRouting }) {
  return {
    async routingMissing(serverId: string, installIds: string[]) {
      if (installIds.length === 0) return 0;
      return withTransaction(deps.db, async (tx) => {
        const placed = await repo.lockPlacedOn(tx, serverId, [...new Set(installIds)].slice(0, 100));
        for (const install of placed) await deps.requestRouting(tx, install);
        return placed.length;
      });
    },
  };
}

export type DriftRepair = ReturnType<typeof createDriftRepair>;
