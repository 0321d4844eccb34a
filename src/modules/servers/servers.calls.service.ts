import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { FleetConfig } from '../../config.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { DriverError, type DriverOperation } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import { sweepKey } from '../../jobs/due.js';
import type { JobQueue } from '../../jobs/queue.js';
import { serverQueue } from '../../jobs/queue.servers.js';
import type { SecretBox } from '../../secrets.js';
import { PLANS_WITH_STABLE_IPS } from '../installs/installs.service.js';
import { createArchiveStore } from './servers.archives.service.js';
import * as repo from './servers.repo.js';

/** What a remote driver call is, as the driver names it (its method) and as an operation (errors). */
export interface CallSpec {
  method: string;
  operation: DriverOperation;
  key: string;
  installId: string;
  input: unknown;
}

/** One call as an agent receives it: the envelope (server, install, placement generation) and the call. */
export interface HandedCall {
  id: string;
  job_id: string;
  method: string;
  key: string;
  input: unknown;
  envelope: { server_id: string; install_id: string; generation: number };
}

export type CallOutcome =
  | { status: 'done'; result: unknown }
  | { status: 'pending'; check_at: string }
  | { status: 'failed'; error: string; final: boolean };

const MAX_ERROR = 2000;
/** The longest an agent may defer the next ask of a call. */
const MAX_DEFER_MS = 3_600_000;
/** How often a control plane process sweeps the archive store for files a crash left (decision #215). */
const SWEEP_EVERY_MS = 10 * 60_000;
/** The key of a move's own calls: `move:<operation id>:<step>`. */
export const MOVE_KEY = /^move:([0-9a-f-]{36}):/;

/**
 * Issue 30: driver calls routed to the agents (docs/decisions.md #152, #155). The remote driver asks
 * (`ask`); the agent of the install's server fetches (`fetch`) and reports (`report`). A call is its
 * `(method, key)`, so asking again, fetching again and reporting again never do the work twice.
 */
export function createFleetCalls({
  db,
  clock,
  queue,
  secretBox,
  fleet,
  archiveDir,
}: {
  db: Db;
  clock: Clock;
  queue: Pick<JobQueue, 'sendToServer' | 'fetchForServer' | 'completeServerJob' | 'enqueue' | 'listen'>;
  secretBox: SecretBox;
  fleet: FleetConfig;
  /** Issue 30: where backups' archives crossing servers are kept (DATA_DIR/fleet-archives). */
  archiveDir: string;
}) {
  const seal = (id: string, value: unknown) =>
    secretBox.seal(Buffer.from(JSON.stringify(value ?? null), 'utf8'), `fleet-call:${id}`);
  const open = (id: string, sealed: string): unknown =>
    JSON.parse(secretBox.open(sealed, `fleet-call:${id}`).toString('utf8'));
  const later = () => new Date(clock.now().getTime() + fleet.checkSeconds * 1000);

  /**
   * Decision #238: an agent's long-poll fetch wakes when a call is queued for its server anywhere
   * (sendToServer's NOTIFY at commit, jobs/queue.listen.ts), not only at its next poll (FLEET_FETCH_POLL_MS); one
   * LISTEN a process, made at its first fetch, ended by `close`. A delayed ask (a pending call's next
   * check) is found by the poll.
   */
  const fetchers = new Map<string, Set<() => void>>();
  /** Wake-ups seen per queue: a fetch waits only if none came since it looked (none is lost in between). */
  const wakes = new Map<string, number>();
  let listening: Promise<() => Promise<void>> | null = null;
  const woken = (queueName: string) => {
    wakes.set(queueName, (wakes.get(queueName) ?? 0) + 1);
    const set = fetchers.get(queueName);
    if (!set) return;
    fetchers.delete(queueName);
    for (const wake of set) wake();
  };
  /** The LISTEN of this process (a failure to make it leaves the poll alone). */
  const listen = () => {
    listening ??= queue.listen(woken).catch(() => async () => {});
    return listening;
  };
  /** Resolves at a wake-up for queue `name` (at once if one came since `seen`), after `ms`, or at `signal`. */
  function nextWake(name: string, seen: number, ms: number, signal?: AbortSignal) {
    return new Promise<void>((resolve) => {
      if ((wakes.get(name) ?? 0) !== seen || signal?.aborted) return resolve();
      const set = fetchers.get(name) ?? new Set<() => void>();
      fetchers.set(name, set);
      const done = () => {
        set.delete(done);
        if (set.size === 0 && fetchers.get(name) === set) fetchers.delete(name);
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
  const archives = createArchiveStore({
    db,
    dir: archiveDir,
    inputOf: (call) => open(call.id, call.input_sealed),
  });
  /**
   * An archive older than this is left by a crash: a day, and longer than a restore may wait for its
   * silent server (twice FLEET_SILENT_FAIL_SECONDS).
   */
  const archiveMaxAgeMs = Math.max(86_400_000, 2 * fleet.silentFailSeconds * 1000);
  let sweptAt = 0;
  /** At most every SWEEP_EVERY_MS, on an agent's fetch (each process; removing twice is harmless). */
  function sweepNow() {
    if (Date.now() - sweptAt < SWEEP_EVERY_MS) return;
    sweptAt = Date.now();
    void archives.sweep(archiveMaxAgeMs).catch(() => undefined);
  }

  /** Places the install on a server (once; the install's row locked): decision #156. */
  async function place(installId: string, operation: DriverOperation) {
    return withTransaction(db, async (tx) => {
      const install = await repo.lockInstall(tx, installId);
      if (!install) throw new DriverError(operation, `install ${installId} no longer exists`, true);
      const liveSince = new Date(clock.now().getTime() - fleet.silentSeconds * 1000);
      const serverId = await repo.pickServer(tx, install.preferred_data_center, liveSince);
      if (!serverId) {
        const where = install.preferred_data_center ? ` in region ${install.preferred_data_center}` : '';
        throw new DriverError(operation, `no live, active hosting server${where} has room for the install`);
      }
      await repo.insertPlacement(tx, installId, serverId, clock.now());
      // I9: only the plans with stable IPs show them; theirs are their server's addresses.
      if (PLANS_WITH_STABLE_IPS.includes(install.plan))
        await repo.setStableIpsFromServer(tx, installId, serverId);
    });
  }

  /**
   * A queued call: waiting (with the reason while its server is silent), or failed after the bound.
   * `park`: past the bound the call is not given up but left queued for the server's return, and the
   * answer says so (`parked`: a clean-up that must run there once it is back, decision #213).
   */
  async function waiting(
    call: repo.CallRow,
    operation: DriverOperation,
    park = false,
  ): Promise<{ done: false; checkAt: Date; parked?: string }> {
    // The server the call is queued on (a move's calls are not all on the install's placement).
    const server = await repo.heartbeatOf(db, call.server_id);
    const heartbeat = server?.last_heartbeat_at ?? null;
    const now = clock.now().getTime();
    const silent = !heartbeat || now - heartbeat.getTime() > fleet.silentSeconds * 1000;
    if (!silent) {
      if (call.waiting_reason) await noteWaiting(call, null);
      return { done: false as const, checkAt: later() };
    }
    const name = server?.name ?? call.server_id;
    const since = Math.max(heartbeat?.getTime() ?? 0, call.created_at.getTime());
    const reason = heartbeat
      ? `hosting server ${name} is silent (last heartbeat ${heartbeat.toISOString()})`
      : `hosting server ${name} has no agent heartbeat yet`;
    if (now - since > fleet.silentFailSeconds * 1000) {
      if (park) {
        if (call.waiting_reason !== reason) await noteWaiting(call, reason);
        return { done: false as const, checkAt: later(), parked: reason };
      }
      const error = `${reason}: the call waited ${fleet.silentFailSeconds} s and was given up`;
      await withTransaction(db, async (tx) => {
        await repo.updateCall(tx, call.id, {
          state: 'failed',
          error,
          final: true,
          waiting_reason: null,
          settled_at: clock.now(),
        });
        await repo.setOperationWaiting(tx, call.key, null);
      });
      // Settled: the archive it would have fed on is no longer needed (decision #215).
      await archives.release(call).catch(() => undefined);
      throw new DriverError(operation, error, true);
    }
    if (call.waiting_reason !== reason) await noteWaiting(call, reason);
    return { done: false as const, checkAt: later() };
  }

  /** Why the call waits (null: it no longer does), on the call and on its operation (shown there). */
  const noteWaiting = (call: repo.CallRow, reason: string | null) =>
    withTransaction(db, async (tx) => {
      await repo.updateCall(tx, call.id, { waiting_reason: reason });
      await repo.setOperationWaiting(tx, call.key, reason);
    });

  /**
   * A settled call: its result, or its failure as a DriverError. A failure a retry can change (not
   * `final`) puts the call back in its server's queue first, so the job's retry asks a fresh run.
   */
  const settled = async (call: repo.CallRow, operation: DriverOperation) => {
    if (call.state === 'done')
      return { done: true as const, value: call.result_sealed ? open(call.id, call.result_sealed) : null };
    if (!call.final)
      await withTransaction(db, async (tx) => {
        const jobId = await queue.sendToServer(tx, call.server_id, call.id);
        await repo.updateCall(tx, call.id, { state: 'queued', job_id: jobId, settled_at: null });
      });
    throw new DriverError(operation, call.error ?? 'failed', call.final);
  };

  /** Records a call and queues its first ask on `serverId` (a concurrent first ask queues nothing more). */
  async function queueCall(spec: CallSpec, serverId: string, generation: number) {
    const id = randomUUID();
    await withTransaction(db, async (tx) => {
      const inserted = await repo.insertCall(tx, {
        id,
        method: spec.method,
        key: spec.key,
        server_id: serverId,
        install_id: spec.installId,
        generation,
        input_sealed: seal(id, spec.input),
        created_at: clock.now(),
      });
      if (!inserted) return;
      const jobId = await queue.sendToServer(tx, serverId, id);
      await repo.updateCall(tx, id, { job_id: jobId });
    });
    return { done: false as const, checkAt: later() };
  }

  /**
   * Whether a queued call may be handed to `serverId`: its generation is the install's placement
   * there, or it is a move's call on that move's source or target (decision #175).
   */
  async function current(call: repo.CallRow, serverId: string) {
    const generation = await repo.generationOf(db, call.install_id, serverId);
    if (generation === call.generation) return true;
    const move = MOVE_KEY.exec(call.key)?.[1];
    // A move's clean-up (deprovision) runs even after the move settled: it was left queued for a
    // server that was silent (decision #213).
    const cleanUp = call.method === 'deprovision';
    return move ? repo.moveAllows(db, move, call.install_id, serverId, call.generation, cleanUp) : false;
  }

  /**
   * A stale call (its install moved): a move's own call fails (the move rolls back or has ended);
   * any other is queued again on the install's new server at its generation, so the operation that
   * asked it completes there (decision #176). False when the install is placed nowhere.
   */
  async function reroute(call: repo.CallRow, serverId: string, jobId: string) {
    const failed = await withTransaction(db, async (tx) => {
      const placement = MOVE_KEY.test(call.key) ? null : await repo.placementOf(tx, call.install_id);
      if (placement && placement.server_id !== serverId) {
        const next = await queue.sendToServer(tx, placement.server_id, call.id);
        await repo.updateCall(tx, call.id, {
          server_id: placement.server_id,
          generation: placement.generation,
          job_id: next,
          waiting_reason: null,
        });
      } else {
        await repo.updateCall(tx, call.id, {
          state: 'failed',
          final: true,
          error: `stale placement: the call was for generation ${call.generation} on server ${serverId}, the install is at ${placement?.generation ?? 'another server'}`,
          settled_at: clock.now(),
        });
      }
      await queue.completeServerJob(tx, serverId, jobId);
      return !(placement && placement.server_id !== serverId);
    });
    // A call failed as stale feeds on no archive any more (decision #215).
    if (failed) await archives.release(call).catch(() => undefined);
  }

  return {
    /** Issue 30: backups' archives crossing servers (servers.archives.service.ts). */
    archives,
    archiveMaxAgeMs,

    /**
     * The archives of the backup calls keyed `<prefix>...` go (a move settled: what its restores did
     * not use, decision #215).
     */
    async releaseArchives(prefix: string) {
      await archives.drop(await repo.backupCallIds(db, prefix));
    },

    /**
     * The remote driver's one entry: the call's result once the agent reported it, else
     * `{done:false, checkAt}` (the first ask queues it on the install's server).
     */
    async ask(spec: CallSpec): Promise<{ done: true; value: unknown } | { done: false; checkAt: Date }> {
      const existing = await repo.callByKey(db, spec.method, spec.key);
      if (existing)
        return existing.state === 'queued'
          ? waiting(existing, spec.operation)
          : settled(existing, spec.operation);
      let placement = await repo.placementOf(db, spec.installId);
      if (!placement) {
        // Nothing was ever placed for a deleted install: nothing to remove.
        if (spec.method === 'deprovision') return { done: true, value: {} };
        await place(spec.installId, spec.operation);
        placement = await repo.placementOf(db, spec.installId);
        if (!placement) throw new DriverError(spec.operation, 'the install could not be placed');
      }
      return queueCall(spec, placement.server_id, placement.generation);
    },

    /**
     * Issue 30: like `ask`, on a server and placement generation the caller names (a move's calls on
     * its source and its target, decision #175); the call's key must be the move's (`move:<id>:...`).
     */
    async askOn(
      spec: CallSpec,
      at: { serverId: string; generation: number },
      options: { park?: boolean } = {},
    ): Promise<{ done: true; value: unknown } | { done: false; checkAt: Date; parked?: string }> {
      const existing = await repo.callByKey(db, spec.method, spec.key);
      if (existing)
        return existing.state === 'queued'
          ? waiting(existing, spec.operation, options.park)
          : settled(existing, spec.operation);
      return queueCall(spec, at.serverId, at.generation);
    },

    /** Issue 21: drops the administrator password from the install's stored provision results. */
    async forgetAdminPassword(installId: string) {
      for (const call of await repo.settledCallsOf(db, installId, 'provision')) {
        if (!call.result_sealed) continue;
        const value = open(call.id, call.result_sealed) as { wordpress_admin?: { password: string | null } };
        if (!value.wordpress_admin?.password) continue;
        value.wordpress_admin.password = null;
        await repo.updateCall(db, call.id, { result_sealed: seal(call.id, value) });
      }
    },

    serverOf: async (installId: string) => (await repo.placementOf(db, installId))?.server_id ?? null,

    /** Issue 30 (decision #225): the archive an `exportArchive` call's agent uploaded, or null when gone. */
    openArchive: (archive: { id: string; sha256: string; bytes: number }) => archives.openExport(archive),

    /**
     * An agent's fetch: up to `max` calls of its own server's queue, waiting up to `waitSeconds`
     * (bounded by FLEET_FETCH_WAIT_SECONDS) for one. A call already settled, or of a placement
     * generation the install has left, is never handed out.
     */
    async fetch(
      serverId: string,
      max: number,
      waitSeconds: number,
      signal?: AbortSignal,
    ): Promise<HandedCall[]> {
      sweepNow();
      const deadline = Date.now() + Math.min(waitSeconds, fleet.fetchWaitSeconds) * 1000;
      const name = serverQueue(serverId);
      await listen();
      for (;;) {
        // A caller gone takes nothing (its calls would be active for nobody until its successor).
        if (signal?.aborted) return [];
        const seen = wakes.get(name) ?? 0;
        const handed: HandedCall[] = [];
        for (const job of await queue.fetchForServer(serverId, max)) {
          const call = await repo.callById(db, job.callId);
          if (!call || call.server_id !== serverId || call.state !== 'queued') {
            await withTransaction(db, (tx) => queue.completeServerJob(tx, serverId, job.jobId));
            continue;
          }
          if (!(await current(call, serverId))) {
            await reroute(call, serverId, job.jobId);
            continue;
          }
          handed.push({
            id: call.id,
            job_id: job.jobId,
            method: call.method,
            key: call.key,
            input: open(call.id, call.input_sealed),
            envelope: { server_id: serverId, install_id: call.install_id, generation: call.generation },
          });
        }
        if (handed.length > 0 || Date.now() >= deadline || signal?.aborted) return handed;
        await nextWake(name, seen, Math.min(fleet.fetchPollMs, deadline - Date.now()), signal);
      }
    },

    /** The fetches' LISTEN ended (the process stops). */
    async close() {
      const unlisten = listening;
      listening = null;
      if (unlisten) await (await unlisten)();
    },

    /**
     * An agent's report on one of its calls: 404 unknown, 403 another server's. A call settled already
     * is acknowledged as it is (a retried report); `pending` queues the call's next ask at `check_at`.
     */
    async report(serverId: string, callId: string, jobId: string, outcome: CallOutcome) {
      let ended: repo.CallRow | null = null;
      const answer = await withTransaction(db, async (tx) => {
        const call = await repo.callById(tx, callId, true);
        if (!call) throw Errors.notFound();
        if (call.server_id !== serverId) throw Errors.forbidden();
        if (call.state !== 'queued') {
          await queue.completeServerJob(tx, serverId, jobId);
          return { state: call.state };
        }
        const now = clock.now();
        // The agent answered: the call no longer waits on a silent server.
        if (call.waiting_reason) await repo.setOperationWaiting(tx, call.key, null);
        if (outcome.status === 'pending') {
          await queue.completeServerJob(tx, serverId, jobId);
          // A report of an ask already asked again (a retried report) queues nothing more.
          if (call.job_id !== jobId) return { state: call.state };
          // pg-boss counts start_after in the database's time: the delay goes, not our clock's instant.
          const delayMs = Math.min(Math.max(Date.parse(outcome.check_at) - now.getTime(), 0), MAX_DEFER_MS);
          const next = await queue.sendToServer(tx, serverId, call.id, Math.ceil(delayMs / 1000));
          await repo.updateCall(tx, call.id, { job_id: next, waiting_reason: null });
          return { state: 'queued' };
        }
        if (outcome.status === 'done' || outcome.final) ended = call;
        if (outcome.status === 'done') {
          await repo.updateCall(tx, call.id, {
            state: 'done',
            result_sealed: seal(call.id, outcome.result),
            waiting_reason: null,
            settled_at: now,
          });
          if (call.method === 'deprovision') await repo.deletePlacement(tx, call.install_id, call.generation);
        } else {
          await repo.updateCall(tx, call.id, {
            state: 'failed',
            error: outcome.error.slice(0, MAX_ERROR),
            final: outcome.final,
            waiting_reason: null,
            settled_at: now,
          });
        }
        await queue.completeServerJob(tx, serverId, jobId);
        // Decisions 228-229: the operation waiting on the call runs now, not at its ask-again time.
        const operationId = repo.operationOfKey(call.key);
        if (operationId) await sweepKey(tx, queue, `operation:${operationId}`);
        return { state: outcome.status };
      });
      // Issue 30: the archive a settled copy or restore fed on is no longer needed (decision #195).
      if (ended) await archives.release(ended).catch(() => undefined);
      return answer;
    },
  };
}

export type FleetCalls = ReturnType<typeof createFleetCalls>;
