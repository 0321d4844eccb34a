import type { Db } from '../db/client.js';
import * as bossRepo from './boss.repo.js';
import { transactionAdapter } from './queue.adapters.js';
import type { QueueContext } from './queue.context.js';

/**
 * Issue 30: one pg-boss queue per hosting server (docs/decisions.md #152). Its jobs hold only the id
 * of a fleet call (modules/servers); the server's agent fetches them through /agent/v1.
 */
export const serverQueue = (serverId: string) => `fleet-${serverId}`;

/** A server's queue: a short expiry (an ask is short, decision #155) and retries that never run out. */
const SERVER_QUEUE = {
  policy: 'standard',
  retryLimit: 100_000,
  retryDelay: 1,
  retryBackoff: false,
  expireInSeconds: 120,
} as const;

export function serverQueues({ boss }: QueueContext) {
  return {
    /** Makes the server's queue when it does not exist yet (safe to call again). */
    async ensureServerQueue(serverId: string) {
      const name = serverQueue(serverId);
      if (await boss().getQueue(name)) return;
      try {
        await boss().createQueue(name, { name, ...SERVER_QUEUE });
      } catch (err) {
        // Made by another process meanwhile: fine.
        if (!(await boss().getQueue(name))) throw err;
      }
    },

    async deleteServerQueue(serverId: string) {
      const name = serverQueue(serverId);
      if (await boss().getQueue(name)) await boss().deleteQueue(name);
    },

    /** Sends one ask of a call in the caller's transaction (after `delaySeconds`); wakes on commit. */
    async sendToServer(tx: Db, serverId: string, callId: string, delaySeconds = 0): Promise<string> {
      const name = serverQueue(serverId);
      const id = await boss().send(
        name,
        { call_id: callId },
        // pg-boss compares start_after with the database's clock: the delay from real time, not the
        // service's (possibly manual) clock.
        {
          db: transactionAdapter(tx),
          ...(delaySeconds > 0 && { startAfter: new Date(Date.now() + delaySeconds * 1000) }),
        },
      );
      if (!id)
        throw new Error(`the call ${callId} was not queued for server ${serverId} (is its queue made?)`);
      await bossRepo.wake(tx, name);
      return id;
    },

    /**
     * Takes up to `batchSize` ready asks of the server's queue (they become active), oldest first:
     * pg-boss picks the oldest but answers them in the order its UPDATE ... RETURNING gives, which is
     * not the queue's, so a batch holding an install's deprovision and an older call for it could run
     * the deprovision first (decision #232).
     */
    async fetchForServer(serverId: string, batchSize: number) {
      const jobs = await boss().fetch<{ call_id: string }>(serverQueue(serverId), {
        batchSize,
        includeMetadata: true,
      });
      return jobs
        .sort((a, b) => new Date(a.createdOn).getTime() - new Date(b.createdOn).getTime())
        .map((job) => ({ jobId: job.id, callId: job.data.call_id }));
    },

    /** Ends an ask in the caller's transaction (its call was settled or asked again). */
    async completeServerJob(tx: Db, serverId: string, jobId: string) {
      await boss().complete(serverQueue(serverId), jobId, undefined as never, { db: transactionAdapter(tx) });
    },

    /**
     * Gives back every active ask of the server (a new agent session: the previous process died with
     * them), untried (boss.repo.ts `putBack`). Answers how many.
     */
    async putBackServerJobs(tx: Db, serverId: string, reason: string): Promise<number> {
      const name = serverQueue(serverId);
      const ids = await bossRepo.activeIds(tx, name);
      if (ids.length === 0) return 0;
      const back = await bossRepo.putBack(tx, name, ids, reason);
      await bossRepo.wake(tx, name);
      return back.length;
    },
  };
}
