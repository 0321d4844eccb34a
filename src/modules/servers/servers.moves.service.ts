import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { FleetConfig } from '../../config.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type {
  InstallRef as DriverInstallRef,
  DriverOperation,
  RoutingRequest,
  Snapshot,
} from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import {
  inputOf,
  type OperationRow,
  type OperationState,
  type OperationsService,
  stateOf,
} from '../operations/operations.service.js';
import type { CallSpec } from './servers.calls.service.js';
import * as repo from './servers.repo.js';
import { MOVE_PROTOCOL } from './servers.service.js';

/** What a move reads of an install (the installs module's row has these fields). */
export interface MovedInstall {
  id: string;
  name: string;
  account_id: string;
  status: string;
  wp_version: string | null;
}

export interface MovesDeps {
  db: Db;
  clock: Clock;
  fleet: FleetConfig;
  operations: Pick<
    OperationsService,
    | 'start'
    | 'begin'
    | 'waitUntil'
    | 'complete'
    | 'fail'
    | 'withLocked'
    | 'setState'
    | 'assertIdle'
    | 'openOfType'
    | 'find'
  >;
  installs: { findById(id: string | null, tx?: Db): Promise<MovedInstall | null> };
  calls: {
    askOn(
      spec: CallSpec,
      at: { serverId: string; generation: number },
      options?: { park?: boolean },
    ): Promise<{ done: true; value: unknown } | { done: false; checkAt: Date; parked?: string }>;
    /** Decision #215: the archives of a settled move's backups go. */
    releaseArchives(prefix: string): Promise<void>;
  };
  /** Issue 30 (decision #226): the install's backups, which a move carries to its target. */
  backups: {
    carriable(installId: string, tx?: Db): Promise<CarriableBackup[]>;
    unfinished(tx: Db, installId: string): Promise<number>;
    adoptSnapshot(tx: Db, backupId: string, snapshot: Snapshot): Promise<boolean>;
  };
  /** Issue 21: the switch re-applies the install's routing (and certificates) on its new server. */
  requestRouting: (tx: Db, install: { id: string; account_id: string; status: string }) => Promise<void>;
  /** The install's whole routing state (routing.service.ts), served by the target before the switch. */
  routingOf: (install: DriverInstallRef) => Promise<RoutingRequest>;
  /** Expected seconds of a move (the operation's expected_at). */
  estimateSeconds: (operation: DriverOperation) => number;
}

/** A completed backup of an install, as a move carries it (decision #226). */
export interface CarriableBackup {
  id: string;
  description: string;
  snapshot: Snapshot;
}

/** How many installs one drain request starts moving (the rest: drain again). */
export const DRAIN_BATCH = 500;

export type MoveState = OperationState<'move_install'>;

/** A move's plan: the install, where it is (server, generation) and where it goes. */
interface Plan {
  install: MovedInstall;
  source: { server_id: string; generation: number };
  target_server_id: string;
}

/**
 * Issue 30: moving an install to another hosting server, and draining a server (docs/decisions.md
 * #175-#180). A move is an operation (`move_install`) whose step job (servers.moves.jobs.ts) copies,
 * syncs, verifies, switches and cleans through keyed fleet calls on the source and the target.
 */
export function createMovesService(deps: MovesDeps) {
  const { db, clock, fleet, operations, installs } = deps;
  const liveSince = () => new Date(clock.now().getTime() - fleet.silentSeconds * 1000);

  /** The checks of a move (the install's row locked in `tx`): 404, 409, or 400 on the target. */
  async function plan(tx: Db, installId: string, targetServerId: string | null): Promise<Plan> {
    const locked = await repo.lockInstall(tx, installId);
    const install = locked && (await installs.findById(installId, tx));
    if (!locked || !install) throw Errors.notFound();
    const placement = await repo.placementOf(tx, installId);
    if (!placement)
      throw Errors.conflict(
        `Install ${install.name} is not placed on a hosting server (HOSTING_DRIVER=fleet places an install when it is provisioned)`,
      );
    const open = await operations.openOfType(installId, 'move_install', tx);
    if (open) throw Errors.conflict(`Install ${install.name} is being moved already (operation ${open.id})`);
    await operations.assertIdle(tx, install, 'read', 'install_id');
    // Decision #243: an agent of an older protocol keeps the work it knows; a move is not among it.
    const source = await repo.targetOf(tx, placement.server_id);
    if (source && source.protocol < MOVE_PROTOCOL)
      throw Errors.conflict(
        `Install ${install.name} is on ${source.name}, whose agent ${agentOf(source)} cannot take part in a move (it needs agent protocol ${MOVE_PROTOCOL}): upgrade that agent first`,
      );
    let target = targetServerId;
    if (target === null) {
      target = await repo.pickTarget(
        tx,
        placement.server_id,
        locked.preferred_data_center,
        liveSince(),
        MOVE_PROTOCOL,
      );
      if (!target)
        throw Errors.conflict(
          'No other live, active hosting server (with an agent that takes moves) has room for the install: add one, upgrade one, or free capacity',
        );
    } else {
      const row = await repo.targetOf(tx, target);
      const refuse = (why: string) => Errors.invalidValue('move', 'server_id', why);
      if (!row) throw refuse(`No hosting server ${target}`);
      if (row.id === placement.server_id) throw refuse(`Install ${install.name} is on ${row.name} already`);
      if (row.state !== 'active') throw refuse(`Server ${row.name} is ${row.state}: it takes no installs`);
      const beat = row.last_heartbeat_at === null ? null : new Date(row.last_heartbeat_at);
      if (!beat || beat <= liveSince()) throw refuse(`Server ${row.name} is not live (no recent heartbeat)`);
      if (row.free <= 0) throw refuse(`Server ${row.name} is full`);
      if (row.protocol < MOVE_PROTOCOL)
        throw refuse(
          `Server ${row.name}'s agent ${agentOf(row)} cannot take part in a move (it needs agent protocol ${MOVE_PROTOCOL}): upgrade it first`,
        );
    }
    return {
      install,
      source: { server_id: placement.server_id, generation: placement.generation },
      target_server_id: target,
    };
  }

  const expected = () =>
    3 * deps.estimateSeconds('backup') +
    2 * deps.estimateSeconds('restore') +
    deps.estimateSeconds('deprovision');

  /** Starts a move in `tx` (the checks first); the operation. */
  async function startWithin(tx: Db, installId: string, target: string | null, drainId: string | null) {
    const planned = await plan(tx, installId, target);
    const op = await operations.start(tx, {
      install: { id: planned.install.id, account_id: planned.install.account_id },
      type: 'move_install',
      resource: { type: 'install', id: planned.install.id },
      input: { target_server_id: planned.target_server_id, drain_id: drainId },
      expectedSeconds: expected(),
    });
    await operations.setState(tx, op.id, 'move_install', {
      phase: 'copying',
      source_server_id: planned.source.server_id,
      source_generation: planned.source.generation,
      target_generation: planned.source.generation + 1,
    });
    return op;
  }

  /** The placement and the latest move of an install (GET /admin/v1/installs/{id}/move). */
  async function view(installId: string) {
    const install = await installs.findById(installId);
    if (!install) throw Errors.notFound();
    const placement = await repo.placementOf(db, installId);
    const move = await repo.latestMove(db, installId);
    const state = (move?.state ?? {}) as MoveState;
    const input = (move?.input ?? {}) as { target_server_id?: string };
    const open = move?.status === 'queued' || move?.status === 'in_progress';
    // move_failed: the latest move failed and the install is still where it was (it serves there).
    const status = open
      ? 'moving'
      : move?.status === 'failed' && placement?.server_id === state.source_server_id
        ? 'move_failed'
        : 'placed';
    return {
      install_id: installId,
      status: placement ? status : 'unplaced',
      server:
        placement === null
          ? null
          : { id: placement.server_id, name: placement.server_name, generation: placement.generation },
      move:
        move === null
          ? null
          : {
              operation_id: move.id,
              status: move.status,
              phase: state.phase ?? null,
              source_server_id: state.source_server_id ?? null,
              target_server_id: input.target_server_id ?? null,
              cancel_requested: state.cancel === true,
              forward_until: state.forward_until ?? null,
              error: move.error,
              created_at: move.created_at.toISOString(),
              completed_at: move.completed_at?.toISOString() ?? null,
            },
    };
  }

  return {
    view,

    /** POST /admin/v1/installs/{id}/move?dry_run=true: the checks, and where it would go. */
    async moveDryRun(installId: string, target: string | null) {
      const planned = await withTransaction(db, (tx) => plan(tx, installId, target));
      return {
        dry_run: true as const,
        operation: 'move_install' as const,
        install_id: installId,
        source_server_id: planned.source.server_id,
        target_server_id: planned.target_server_id,
        expected_seconds: expected(),
      };
    },

    /** POST /admin/v1/installs/{id}/move: the move operation (202). */
    move: (installId: string, target: string | null) =>
      withTransaction(db, (tx) => startWithin(tx, installId, target, null)),

    /**
     * POST /admin/v1/installs/{id}/move/cancel: the open move rolls back (its target cleaned, the
     * source serving all along); 409 once it has switched (it completes on the target) or when none.
     */
    async cancel(installId: string) {
      if (!(await installs.findById(installId))) throw Errors.notFound();
      const open = await operations.openOfType(installId, 'move_install');
      if (!open) throw Errors.conflict('The install has no move in progress');
      const op = await requestCancel(open.id);
      if (!op) throw Errors.conflict('The move has ended meanwhile');
      await operations.waitUntil(op, clock.now());
      return view(installId);
    },

    /**
     * POST /admin/v1/servers/{id}/drain: the server is cordoned (`draining`) and each of its installs
     * (up to DRAIN_BATCH) starts a move to the server placement picks; those that cannot start are
     * answered with the reason.
     */
    async drain(serverId: string) {
      if (!(await repo.updateServer(db, serverId, { state: 'draining' }))) throw Errors.notFound();
      const drainId = randomUUID();
      const started: string[] = [];
      const skipped: { install_id: string; reason: string }[] = [];
      for (const installId of await repo.placedOn(db, serverId, DRAIN_BATCH)) {
        try {
          await withTransaction(db, (tx) => startWithin(tx, installId, null, drainId));
          started.push(installId);
        } catch (err) {
          skipped.push({ install_id: installId, reason: (err as Error).message });
        }
      }
      return { drain_id: drainId, started, skipped };
    },

    /** POST /admin/v1/servers/{id}/undrain: active again; the drain's moves not switched roll back. */
    async undrain(serverId: string) {
      if (!(await repo.updateServer(db, serverId, { state: 'active' }))) throw Errors.notFound();
      const latest = (await repo.drainProgress(db, serverId))[0]?.drain_id ?? null;
      let cancelled = 0;
      if (latest)
        for (const installId of await repo.openDrainMoves(db, latest)) {
          const open = await operations.openOfType(installId, 'move_install');
          // A move that has switched completes on its target (requestCancel's 409).
          const op = open && (await requestCancel(open.id).catch(() => null));
          if (!op) continue;
          await operations.waitUntil(op, clock.now());
          cancelled++;
        }
      return { cancelled };
    },

    /** The latest drain's moves of a server (GET /admin/v1/servers/{id}), null when never drained. */
    async drainProgress(serverId: string) {
      const rows = await repo.drainProgress(db, serverId);
      if (rows.length === 0) return null;
      const count = (status: string) => rows.find((r) => r.status === status)?.count ?? 0;
      return {
        drain_id: rows[0]?.drain_id ?? '',
        moved: count('completed'),
        moving: count('queued') + count('in_progress'),
        failed: count('failed'),
      };
    },
  };

  /** Marks the open move cancelled unless it has switched; the operation, or null (ended, switched: 409). */
  async function requestCancel(operationId: string): Promise<OperationRow | null> {
    return operations.withLocked(operationId, async (tx, op) => {
      const state = stateOf(op, 'move_install');
      if (state.phase === 'switched')
        throw Errors.conflict(
          'The move has switched already: the install serves from its new server, and the move completes there',
        );
      if (!state.cancel) await operations.setState(tx, op.id, 'move_install', { ...state, cancel: true });
      return op;
    });
  }
}

export type MovesService = ReturnType<typeof createMovesService>;

/**
 * Issue 30 (decision #214): an install being moved is not deleted (409 naming the move): during a
 * move two servers hold parts of it, and a delete must leave nothing of it on either. In the delete's
 * transaction, the install's row locked (a move starts under the same lock).
 */
export async function refuseDeleteWhileMoving(tx: Db, install: { id: string; name: string }) {
  const move = await repo.latestMove(tx, install.id);
  if (move?.status !== 'queued' && move?.status !== 'in_progress') return;
  const by = move.expected_at ? `, expected to end by ${move.expected_at.toISOString()}` : '';
  throw Errors.conflict(
    `Install ${install.name} is being moved to another hosting server (operation ${move.id}${by}): delete it once the move has ended, or ask the host to cancel the move`,
  );
}

/** How an error names a server's agent: its version and protocol. */
const agentOf = (row: { agent_version: string | null; protocol: number }) =>
  `${row.agent_version ?? '(unknown version)'} (protocol ${row.protocol})`;

/** The install as the driver is told it. */
export const moveRef = (install: MovedInstall): DriverInstallRef => ({
  id: install.id,
  name: install.name,
  wp_version: install.wp_version,
});

export { inputOf, stateOf };
