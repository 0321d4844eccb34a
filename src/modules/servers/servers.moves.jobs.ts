import { isDeepStrictEqual } from 'node:util';
import type { Db } from '../../db/client.js';
import {
  DriverError,
  type DriverOperation,
  type RestoreResult,
  type Snapshot,
} from '../../drivers/driver.js';
import type { RemoteMethod } from '../../fleet/remote-driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { PLANS_WITH_STABLE_IPS } from '../installs/installs.service.js';
import type { OperationRow } from '../operations/operations.service.js';
import {
  type CarriableBackup,
  inputOf,
  type MovedInstall,
  type MoveState,
  type MovesDeps,
  moveRef,
  stateOf,
} from './servers.moves.service.js';
import * as repo from './servers.repo.js';
import { MOVE_PROTOCOL } from './servers.service.js';

type Where = { serverId: string; generation: number };
/** Each carried backup by id: its snapshot on the source and on the target (decision #226). */
type Carried = Map<string, { from: Snapshot; to: Snapshot }>;
type Payload = { operation_id: string };

/** The step did not finish: ask again at `checkAt`. */
class Later {
  constructor(readonly checkAt: Date) {}
}

const DIRECTORY_BLOCK = 4096;

/** Why two snapshots of the same content differ (null: they match), decision #178. */
export function snapshotMismatch(expected: Snapshot, got: Snapshot): string | null {
  // A tree's bytes count its directories' sizes too, which grow by 4 KiB blocks with their history
  // (an extracted tree is laid out anew): up to 16 such blocks apart is the same content (decision #197).
  const apart = Math.abs(expected.file_bytes - got.file_bytes);
  if (apart !== 0 && (apart % DIRECTORY_BLOCK !== 0 || apart > 16 * DIRECTORY_BLOCK))
    return `files: ${got.file_bytes} bytes on the target, ${expected.file_bytes} on the source`;
  // Two dumps (without dates) with one checksum hold the same rows; the tables' sizes on disk are the
  // storage engine's (a table loaded from a dump is laid out anew), compared only without checksums.
  if (expected.checksums && got.checksums)
    return expected.checksums.database === got.checksums.database ? null : 'database: the checksums differ';
  if (!isDeepStrictEqual(expected.db_tables, got.db_tables)) return 'database: the tables differ';
  return null;
}

/**
 * Issue 30: the move_install step job. Every run walks the steps from the start: each is a fleet call
 * keyed `move:<operation>:<step>`, so a step already done answers its stored result and none is done
 * twice (a worker or an agent that died resumes). Before the switch a final failure, a cancel or
 * exhausted retries roll back (the target cleaned; the source served all along); after it, only the
 * source's clean-up remains.
 */
export function createMoveJob(deps: MovesDeps) {
  const { clock, operations, installs, calls } = deps;

  function caller(op: OperationRow, install: MovedInstall) {
    return async <T>(
      method: RemoteMethod,
      operation: DriverOperation,
      step: string,
      at: Where,
      input: unknown,
    ): Promise<T> => {
      const result = await calls.askOn(
        { method, operation, key: `move:${op.id}:${step}`, installId: install.id, input },
        at,
      );
      if (!result.done) throw new Later(result.checkAt);
      return result.value as T;
    };
  }

  /**
   * A clean-up (deprovision) of the move on `at`: null once done; a note when its server stays silent
   * past the bound (the call is left queued and runs when the server is back, decision #213).
   */
  async function cleanUp(op: OperationRow, install: MovedInstall, step: string, at: Where) {
    const result = await calls.askOn(
      {
        method: 'deprovision',
        operation: 'deprovision',
        key: `move:${op.id}:${step}`,
        installId: install.id,
        input: moveRef(install),
      },
      at,
      { park: true },
    );
    if (result.done) return null;
    if (result.parked) return `queued until server ${at.serverId} is back (${result.parked})`;
    throw new Later(result.checkAt);
  }

  /**
   * Decision #226: every completed backup of the install carried to the target: its source exports
   * the backup's archive to the control plane's store (keyed `carry-export:<backup>`), the target
   * keeps it as its own (`carry:<backup>`). All asked at once (each server runs its calls in turn);
   * answers the target's snapshot of each backup by id, or throws Later until all are done. A backup
   * that cannot be carried (its files fail their checksum) fails the move, named (decision #227).
   */
  async function carry(op: OperationRow, install: MovedInstall, source: Where, target: Where) {
    const ask = caller(op, install);
    const ref = moveRef(install);
    const carryOne = async (backup: CarriableBackup) => {
      const { archive: _stale, ...snapshot } = backup.snapshot;
      try {
        const exported = await ask<{ archive?: Snapshot['archive'] }>(
          'exportArchive',
          'backup',
          `carry-export:${backup.id}`,
          source,
          { install: ref, snapshot },
        );
        if (!exported?.archive) throw new DriverError('backup', 'its server exported no archive', true);
        const held = await ask<Snapshot>('adoptBackup', 'backup', `carry:${backup.id}`, target, {
          install: ref,
          snapshot: { ...snapshot, archive: exported.archive },
        });
        return { backup, held };
      } catch (err) {
        if (!(err instanceof DriverError && err.final)) throw err;
        throw new DriverError(
          'backup',
          `backup ${backup.id} ("${backup.description}") could not be carried to the target: ${err.message}; delete that backup or repair it, then move again`,
          true,
        );
      }
    };
    const outcomes = await Promise.allSettled((await deps.backups.carriable(install.id)).map(carryOne));
    const carried: Carried = new Map();
    let later: Later | null = null;
    let failure: unknown = null;
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') {
        carried.set(outcome.value.backup.id, { from: outcome.value.backup.snapshot, to: outcome.value.held });
      } else if (outcome.reason instanceof Later) {
        if (!later || outcome.reason.checkAt < later.checkAt) later = outcome.reason;
      } else if (!failure || (outcome.reason instanceof DriverError && outcome.reason.final)) {
        failure = outcome.reason;
      }
    }
    if (failure) throw failure;
    if (later) throw later;
    return carried;
  }

  /**
   * At the switch, in its transaction (the install's row locked: no backup starts meanwhile): each
   * carried backup's row takes the target's snapshot. False, changing nothing, when a backup is still
   * being taken or one completed that was not carried (taken during the move): the step goes around
   * and carries it first (decision #226).
   */
  async function adoptCarried(tx: Db, installId: string, carried: Carried) {
    if ((await deps.backups.unfinished(tx, installId)) > 0) return false;
    const completed = await deps.backups.carriable(installId, tx);
    const missed = completed.some((b) => !isDeepStrictEqual(carried.get(b.id)?.from, b.snapshot));
    if (missed) return false;
    for (const backup of completed) {
      const to = carried.get(backup.id)?.to;
      if (to) await deps.backups.adoptSnapshot(tx, backup.id, to);
    }
    return true;
  }

  /** The move settled: its backups' archives that no restore used go (decision #215). */
  const releaseArchives = (op: OperationRow) =>
    calls.releaseArchives(`move:${op.id}:`).catch(() => undefined);

  /** Records the phase (and more) under the operation's lock; false when a cancel is asked meanwhile. */
  async function setPhase(opId: string, next: Partial<MoveState>) {
    return operations.withLocked(opId, async (tx, locked) => {
      const state = stateOf(locked, 'move_install');
      if (state.cancel && state.phase !== 'switched' && next.phase !== 'rolling_back') return false;
      await operations.setState(tx, opId, 'move_install', { ...state, ...next });
      return true;
    });
  }

  async function rollback(op: OperationRow, install: MovedInstall, state: MoveState, target: Where) {
    const reason = state.rollback_reason ?? (state.cancel ? 'cancelled' : 'failed');
    if (state.phase !== 'rolling_back')
      await setPhase(op.id, { phase: 'rolling_back', rollback_reason: reason });
    let leftover = '';
    try {
      const parked = await cleanUp(op, install, 'rollback-clean', target);
      if (parked) leftover = ` (cleaning the target: ${parked})`;
    } catch (err) {
      if (err instanceof Later) throw err;
      if (!(err instanceof DriverError && err.final)) throw err;
      leftover = ` (cleaning the target failed: ${err.message}; what it holds of the install is unused)`;
    }
    // The source takes writes again when its final sync had frozen them (decision #211).
    const source = state.source_server_id ?? '';
    const ask = caller(op, install);
    if (state.froze)
      try {
        await ask(
          'applyRouting',
          'apply_routing',
          'rollback-unfreeze',
          { serverId: source, generation: state.source_generation ?? 0 },
          { ...(await deps.routingOf(moveRef(install))), frozen: false },
        );
      } catch (err) {
        if (err instanceof Later || !(err instanceof DriverError && err.final)) throw err;
        leftover += ` (its writes could not be opened again: ${err.message}; apply its routing again)`;
      }
    await operations.fail(
      op.id,
      `The move was rolled back (${reason}): the install stays on server ${source}, which served it throughout${leftover}`,
      async () => ({ details: [['Target', inputOf(op, 'move_install').target_server_id]] }),
    );
    await releaseArchives(op);
  }

  /**
   * Decision #241, after the switch: the source's server blocks pass the install's requests to the
   * target's address until `forward_until`; throws Later until then. Answers what was done (null: no
   * forwarding, the grace is 0 or the target has no address). A source that stays silent, or that
   * cannot forward, is not waited for: its clean-up follows (it serves nobody either way).
   */
  async function forwardSource(op: OperationRow, install: MovedInstall, source: Where, target: Where) {
    const fresh = (await operations.find(op.id)) ?? op;
    const until = stateOf(fresh, 'move_install').forward_until;
    if (!until) return null;
    const address = await repo.addressOf(deps.db, target.serverId);
    if (!address) return null;
    // An agent that does not know `forward_to` would serve its stale copy instead (decision #243).
    const protocol = (await repo.targetOf(deps.db, source.serverId))?.protocol;
    if (protocol === undefined || protocol < MOVE_PROTOCOL)
      return `not forwarded (the old server's agent speaks protocol ${protocol ?? 'unknown'})`;
    const ref = moveRef(install);
    const result = await calls
      .askOn(
        {
          method: 'applyRouting',
          operation: 'apply_routing',
          key: `move:${op.id}:forward-source`,
          installId: install.id,
          input: { ...(await deps.routingOf(ref)), frozen: false, forward_to: address },
        },
        source,
        { park: true },
      )
      .catch((err: unknown) => {
        if (err instanceof DriverError && err.final) return { failed: err.message } as const;
        throw err;
      });
    if ('failed' in result) return `not forwarded (${result.failed})`;
    if (!result.done && result.parked) return `not forwarded (${result.parked})`;
    if (!result.done) throw new Later(result.checkAt);
    const end = new Date(until);
    if (clock.now() < end) throw new Later(end);
    return `forwarded to ${address} until ${until}`;
  }

  async function step(op: OperationRow) {
    const input = inputOf(op, 'move_install');
    const state = stateOf(op, 'move_install');
    const install = await installs.findById(op.install_id);
    if (!install) {
      await operations.fail(op.id, 'The install was deleted during its move', async () => undefined);
      return;
    }
    const source: Where = {
      serverId: state.source_server_id ?? '',
      generation: state.source_generation ?? 0,
    };
    const target: Where = { serverId: input.target_server_id, generation: state.target_generation ?? 0 };
    const ask = caller(op, install);
    const ref = moveRef(install);
    if (state.phase === 'rolling_back' || (state.cancel && state.phase !== 'switched'))
      return rollback(op, install, state, target);

    if (state.phase !== 'switched') {
      let carried: Carried = new Map();
      try {
        // 0. The install made on the target (its system user, database account, pool: what a
        // restore swaps into); 1. a copy while the source serves, its archive crossing through the
        // control plane (decision #195); 2. the final sync (decision #177); 3. the check.
        // The provision and the first backup are on different servers: asked together.
        // The copy's backup keeps its tree's index, its restore answers the tables' fingerprints: the
        // final sync then takes only what changed since (decision #235).
        const shipped = { ...ref, upload_archive: true };
        const [made, taken] = await Promise.allSettled([
          ask('provision', 'provision', 'target-provision', target, ref),
          ask<Snapshot>('backup', 'backup', 'copy-backup', source, { ...shipped, index_files: true }),
        ]);
        if (taken.status === 'rejected') throw taken.reason;
        if (made.status === 'rejected') throw made.reason;
        const first = taken.value;
        const copied = await ask<RestoreResult | null>('restore', 'restore', 'copy-restore', target, {
          install: ref,
          snapshot: first,
          restore_database: true,
          table_fingerprints: true,
        });
        // The install's backups carried while the source still takes writes (the freeze stays short).
        await carry(op, install, source, target);
        // 1b. The target serves the install (nobody is sent there before the switch) before the freeze
        // (decision #239): its server blocks checked and reloaded outside it. Its site URL is the
        // source's, so no row of its copy changes (the final sync compares them).
        await ask('applyRouting', 'apply_routing', 'target-routing', target, {
          ...(await deps.routingOf(ref)),
          frozen: false,
          warm: false,
        });
        if (state.phase === 'copying' && !(await setPhase(op.id, { phase: 'syncing', froze: true })))
          return step((await operations.find(op.id)) ?? op);
        // The freeze (decision #211): from here to the switch the source refuses writes (reads are
        // served), so nothing written there after the final backup is lost.
        await ask('applyRouting', 'apply_routing', 'freeze-source', source, {
          ...(await deps.routingOf(ref)),
          frozen: true,
        });
        const since =
          first.location && copied?.table_fingerprints
            ? { changes_since: { location: first.location, tables: copied.table_fingerprints } }
            : {};
        const last = await ask<Snapshot>('backup', 'backup', 'final-backup', source, {
          ...shipped,
          ...since,
        });
        // Warmed once restored: its page answers (PHP compiled, caches filled) before any visitor is
        // sent there; a target that does not answer is never switched to.
        await ask('restore', 'restore', 'final-restore', target, {
          install: ref,
          snapshot: last,
          restore_database: true,
          warm: true,
        });
        // An incremental restore checked the whole install against the source itself (decision
        // #235). After a whole one (a driver or an agent of before it), a backup of the target is
        // compared, then its routing applied again with the warm-up (such an agent warms nothing).
        if (!last.incremental) {
          const check = await ask<Snapshot>('backup', 'backup', 'verify', target, ref);
          const mismatch = snapshotMismatch(last, check);
          if (mismatch)
            throw new DriverError('restore', `the target's copy does not match: ${mismatch}`, true);
          await ask('applyRouting', 'apply_routing', 'target-warm', target, {
            ...(await deps.routingOf(ref)),
            frozen: false,
            warm: true,
          });
        }
        // Again: the backups completed since (a backup is a read: it runs during a move).
        carried = await carry(op, install, source, target);
      } catch (err) {
        if (err instanceof Later) throw err;
        if (!(err instanceof DriverError && err.final)) throw err;
        await setPhase(op.id, { phase: 'rolling_back', rollback_reason: err.message });
        return rollback(op, install, { ...state, rollback_reason: err.message }, target);
      }
      // 5. The switch: placement to the target at generation + 1, the routing re-applied there.
      const switched = await operations.withLocked(op.id, async (tx, locked) => {
        const current = stateOf(locked, 'move_install');
        if (current.cancel) return false;
        // The install's row first (a backup starts under its lock), then its backups carried.
        const row = await repo.lockInstall(tx, install.id);
        if (!(await adoptCarried(tx, install.id, carried))) return 'again' as const;
        const placement = await repo.lockPlacement(tx, install.id);
        const there = placement?.server_id === target.serverId && placement.generation === target.generation;
        if (!there) {
          const moved = await repo.switchPlacement(
            tx,
            install.id,
            { serverId: source.serverId, generation: source.generation },
            target.serverId,
            clock.now(),
          );
          if (!moved)
            throw new Error(`install ${install.id} is no longer at generation ${source.generation}`);
        }
        // I9 (decision #167): the plans with stable IPs show their new server's addresses.
        if (row && PLANS_WITH_STABLE_IPS.includes(row.plan))
          await repo.setStableIpsFromServer(tx, install.id, target.serverId);
        // Decision #241: the source passes the install's requests on until its DNS records expire.
        const forward = deps.fleet.moveForwardSeconds;
        await operations.setState(tx, op.id, 'move_install', {
          ...current,
          phase: 'switched',
          ...(forward > 0 && {
            forward_until: new Date(clock.now().getTime() + forward * 1000).toISOString(),
          }),
        });
        await deps.requestRouting(tx, install);
        return true;
      });
      // A backup still being taken, or one not carried yet: asked again soon (its own step carries it).
      if (switched === 'again')
        throw new Later(new Date(clock.now().getTime() + deps.fleet.checkSeconds * 1000));
      if (!switched) return step((await operations.find(op.id)) ?? op);
    }
    // 6. The source passes the install's requests to the target for the grace period (visitors whose
    // DNS still names it), then is cleaned (its calls at the old generation are this move's only). The
    // move is done at the switch: a forward or a clean-up that fails for good is reported, not rolled back.
    const forwarded = await forwardSource(op, install, source, target);
    const before = forwarded ? `${forwarded}; ` : '';
    let cleaned = forwarded ? `${forwarded}, then cleaned` : 'cleaned';
    try {
      const parked = await cleanUp(op, install, 'clean-source', source);
      if (parked) cleaned = `${before}${parked}`;
    } catch (err) {
      if (err instanceof Later || !(err instanceof DriverError && err.final)) throw err;
      cleaned = `${before}not cleaned (${err.message}): remove the install's leftovers there by hand`;
    }
    await operations.complete(op.id, async () => ({
      details: [
        ['From', source.serverId],
        ['To', target.serverId],
        ['Source', cleaned],
      ],
    }));
    await releaseArchives(op);
  }

  const job: JobHandler<Payload> = {
    async run({ operation_id }) {
      const op = await operations.begin(operation_id);
      if (!op) return;
      try {
        await step(op);
      } catch (err) {
        if (err instanceof Later) return operations.waitUntil(op, err.checkAt);
        throw err;
      }
    },
    /**
     * Retries used up: before the switch the move rolls back (a new step job runs it); a rollback or
     * a clean-up that keeps failing ends the operation failed, saying where the install is.
     */
    async exhausted({ operation_id }, error) {
      const op = await operations.find(operation_id);
      if (!op || op.status === 'completed' || op.status === 'failed') return;
      const state = stateOf(op, 'move_install');
      if (state.phase !== 'switched' && state.phase !== 'rolling_back') {
        await setPhase(op.id, { phase: 'rolling_back', rollback_reason: error.slice(0, 1000) });
        await operations.waitUntil(op, clock.now());
        return;
      }
      const where =
        state.phase === 'switched'
          ? `the install was moved to server ${inputOf(op, 'move_install').target_server_id} and serves there; cleaning the source failed: ${error}`
          : `the install stays on server ${state.source_server_id}; cleaning the target failed: ${error}`;
      await operations.fail(op.id, `The move ended: ${where}`, async () => undefined);
      await releaseArchives(op);
    },
  };
  return job;
}
