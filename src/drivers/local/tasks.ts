import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { type CallContext, DriverError, type DriverOperation, type DriverResult } from '../driver.js';
import { createLimiter } from './limiter.js';
import * as repo from './local.repo.js';

/**
 * Runs a keyed call's work once (decisions.md #51): finished work is recorded per key (local_tasks)
 * and a repeated key answers the recorded result; work on one install runs one call at a time in this
 * process (staging names are per install); heavy work (backup, restore, copy) waits for one of
 * LOCAL_MAX_HEAVY_OPERATIONS slots. A failure is a DriverError naming the operation.
 */
export type Once = <T>(
  operation: DriverOperation,
  ctx: CallContext,
  installIds: string[],
  work: () => Promise<T>,
  isHeavy?: boolean,
) => Promise<DriverResult<T>>;

export function createTaskRunner({ db, clock, maxHeavy }: { db: Db; clock: Clock; maxHeavy: number }): Once {
  const heavy = createLimiter(maxHeavy);
  const perInstall = new Map<string, Promise<unknown>>();

  async function serial<T>(installId: string, work: () => Promise<T>): Promise<T> {
    const before = perInstall.get(installId) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(work);
    perInstall.set(installId, mine);
    try {
      return await mine;
    } finally {
      if (perInstall.get(installId) === mine) perInstall.delete(installId);
    }
  }

  return async function once<T>(
    operation: DriverOperation,
    ctx: CallContext,
    installIds: string[],
    work: () => Promise<T>,
    isHeavy = false,
  ): Promise<DriverResult<T>> {
    const key = `${operation}:${ctx.key}`;
    const done = await repo.findTask(db, key);
    if (done) return { done: true, value: done.result as T };
    const guarded = async () => {
      const again = await repo.findTask(db, key);
      if (again) return again.result as T;
      const value = isHeavy ? await heavy(ctx.signal, work) : await work();
      await repo.completeTask(db, {
        key,
        operation,
        install_id: installIds[0] ?? null,
        result: value,
        completed_at: clock.now(),
      });
      return value;
    };
    try {
      const value = await installIds.reduceRight<() => Promise<T>>(
        (next, id) => () => serial(id, next),
        guarded,
      )();
      return { done: true, value };
    } catch (err) {
      if (err instanceof DriverError) throw err;
      throw new DriverError(operation, `local ${operation} failed: ${(err as Error).message}`);
    }
  };
}
