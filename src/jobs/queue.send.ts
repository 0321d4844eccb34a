import { Compile } from 'typebox/compile';
import type { Db } from '../db/client.js';
import * as bossRepo from './boss.repo.js';
import type { JobName, JobPayload } from './catalog.js';
import { transactionAdapter } from './queue.adapters.js';
import type { QueueContext } from './queue.context.js';

/** Enqueueing: a job is sent in the caller's transaction, checked against its payload schema. */
export function sending({ specs, boss }: QueueContext) {
  const checks = new Map(Object.entries(specs).map(([name, spec]) => [name, Compile(spec.payload)]));
  return {
    /**
     * Sends a job inside the caller's transaction (style rule 5): it exists exactly when the
     * transaction commits. A NOTIFY in the same transaction wakes idle workers on commit.
     */
    async enqueue<N extends JobName>(tx: Db, name: N, payload: JobPayload<N>): Promise<string | null> {
      const spec = specs[name];
      if (!spec) throw new Error(`unknown job ${name}`);
      if (!checks.get(name)?.Check(payload)) throw new Error(`invalid payload for job ${name}`);
      const singletonKey = spec.singletonKey?.(payload as never);
      const id = await boss().send(name, payload as object, {
        db: transactionAdapter(tx),
        ...(singletonKey && { singletonKey }),
      });
      // A null id without a singleton key means the queue does not exist: never drop work silently.
      if (!id && !singletonKey) throw new Error(`job ${name} was not enqueued (is its queue created?)`);
      await bossRepo.wake(tx, name);
      return id;
    },
  };
}
