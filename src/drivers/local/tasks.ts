import { Type } from 'typebox';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { type CallContext, DriverError, type DriverOperation, type DriverResult } from '../driver.js';
import { TASK_RESULTS, type TaskResult, taskResults } from '../task-results.js';
import { createLimiter } from './limiter.js';
import * as repo from './local.repo.js';
import { isFinal } from './run.js';

/**
 * What a local task records: the interface's answer for its kind (task-results.ts), but provisioning
 * records its WordPress administrator without the password (issue 21: kept sealed in local_installs
 * until the caller has stored it, installs.ts).
 */
const LOCAL_TASK_RESULTS = {
  ...TASK_RESULTS,
  provision: Type.Object({
    ...TASK_RESULTS.provision.properties,
    wordpress_admin: Type.Optional(Type.Object({ username: Type.String(), login_url: Type.String() })),
  }),
};
type LocalResult<K extends DriverOperation> = TaskResult<typeof LOCAL_TASK_RESULTS, K>;
const resultOf = taskResults('local', LOCAL_TASK_RESULTS);

/**
 * Runs a keyed call's work once (decisions.md #51): finished work is recorded per key (local_tasks)
 * and a repeated key answers the recorded result; work on one install runs one call at a time in this
 * process (staging names are per install); heavy work (backup, restore, copy) waits for one of
 * LOCAL_MAX_HEAVY_OPERATIONS slots. A failure is a DriverError naming the operation. A recorded result
 * is checked against its kind's shape before it is answered (a damaged record is refused).
 */
export type Once = <K extends DriverOperation>(
  operation: K,
  ctx: CallContext,
  installIds: string[],
  work: () => Promise<LocalResult<K>>,
  isHeavy?: boolean,
) => Promise<DriverResult<LocalResult<K>>>;

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

  return async function once<K extends DriverOperation>(
    operation: K,
    ctx: CallContext,
    installIds: string[],
    work: () => Promise<LocalResult<K>>,
    isHeavy = false,
  ): Promise<DriverResult<LocalResult<K>>> {
    const key = `${operation}:${ctx.key}`;
    const done = await repo.findTask(db, key);
    if (done) return { done: true, value: resultOf(operation, key, done.result) };
    const guarded = async () => {
      const again = await repo.findTask(db, key);
      if (again) return resultOf(operation, key, again.result);
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
      const value = await installIds.reduceRight<() => Promise<LocalResult<K>>>(
        (next, id) => () => serial(id, next),
        guarded,
      )();
      return { done: true, value };
    } catch (err) {
      if (err instanceof DriverError) throw err;
      // Issue 29 defect 2: a failure a retry cannot change (a permission, a missing tool, a refused
      // configuration) is final: the operation ends now with its reason.
      throw new DriverError(operation, `local ${operation} failed: ${(err as Error).message}`, isFinal(err));
    }
  };
}
