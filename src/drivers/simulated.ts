import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import { withTransaction } from '../db/transaction.js';
import {
  type CallContext,
  DRIVER_OPERATIONS,
  DriverError,
  type DriverOperation,
  type DriverResult,
  type HostingDriver,
  type InstallRef,
  type Snapshot,
} from './driver.js';
import * as repo from './simulated.repo.js';

export interface SimulatedDriverDeps {
  db: Db;
  clock: Clock;
  /** Seconds each operation takes, by the injected clock (SIMULATED_DURATIONS). */
  durations: Readonly<Record<DriverOperation, number>>;
}

/** What a simulated install reports when nothing else is known. */
const SIMULATED_PHP_VERSION = '8.2';
const WORDPRESS_TABLES = [
  'wp_options',
  'wp_posts',
  'wp_postmeta',
  'wp_users',
  'wp_usermeta',
  'wp_terms',
  'wp_termmeta',
  'wp_term_taxonomy',
  'wp_term_relationships',
  'wp_comments',
  'wp_commentmeta',
  'wp_links',
];
const MB = 1024 * 1024;

/** A believable, stable first state for an install the simulation has not seen: sizes from its id. */
function initialState(install: InstallRef): repo.SimulatedState {
  const seed = createHash('sha256').update(install.id).digest();
  const db_tables = Object.fromEntries(
    WORDPRESS_TABLES.map((table, i) => [table, (64 + (seed[i] ?? 0) * 16) * 1024]),
  );
  return {
    wp_version: install.wp_version,
    file_bytes: 40 * MB + (seed.readUInt32BE(20) % (160 * MB)),
    db_tables,
  };
}

const pick = (tables: Record<string, number>, names: string[]) =>
  Object.fromEntries(Object.entries(tables).filter(([name]) => names.includes(name)));

const dbBytes = (tables: Record<string, number>) => Object.values(tables).reduce((a, b) => a + b, 0);

/**
 * The simulated hosting platform (HOSTING_DRIVER=simulated, the default). Nothing real happens: the
 * "platform" is three tables. Each call is keyed: the first call starts a task that is ready after
 * the configured duration *by the injected clock*; calls before then answer "ask again at T"; the
 * first call after it applies the effect once and records the result, later calls return it.
 * Faults from POST /admin/v1/faults make the next calls of an operation fail or hang.
 */
export function createSimulatedDriver({ db, clock, durations }: SimulatedDriverDeps) {
  async function fault(operation: DriverOperation, signal: AbortSignal) {
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

  async function call<T>(
    operation: DriverOperation,
    ctx: CallContext,
    installId: string | null,
    apply: (tx: Db, now: Date) => Promise<T>,
  ): Promise<DriverResult<T>> {
    await fault(operation, ctx.signal);
    const now = clock.now();
    const task = await repo.ensureTask(db, {
      key: `${operation}:${ctx.key}`,
      operation,
      install_id: installId,
      ready_at: new Date(now.getTime() + durations[operation] * 1000),
      created_at: now,
    });
    if (task.applied_at) return { done: true, value: task.result as T };
    if (now < task.ready_at) return { done: false, checkAt: task.ready_at };
    return withTransaction(db, async (tx) => {
      const locked = await repo.lockTask(tx, `${operation}:${ctx.key}`);
      if (locked?.applied_at) return { done: true as const, value: locked.result as T };
      const value = await apply(tx, now);
      await repo.markApplied(tx, `${operation}:${ctx.key}`, value, now);
      return { done: true as const, value };
    });
  }

  /** The platform's state of an install; the control plane's record of its WordPress version wins. */
  async function stateOf(tx: Db, install: InstallRef): Promise<repo.SimulatedState> {
    const state = (await repo.findState(tx, install.id)) ?? initialState(install);
    return { ...state, wp_version: install.wp_version };
  }

  const driver: HostingDriver = {
    name: 'simulated',

    estimateSeconds: (operation: DriverOperation) => durations[operation],

    provision: (ctx: CallContext, install: InstallRef) =>
      call('provision', ctx, install.id, async (tx, now) => {
        const state = await stateOf(tx, install);
        await repo.saveState(tx, install.id, state, now);
        return { wp_version: state.wp_version, php_version: SIMULATED_PHP_VERSION };
      }),

    copy: (
      ctx: CallContext,
      input: {
        source: InstallRef;
        destination: InstallRef;
        include_files: boolean;
        include_db: boolean;
        db_tables: string[] | null;
      },
    ) =>
      call('copy', ctx, input.destination.id, async (tx, now) => {
        const source = await stateOf(tx, input.source);
        const target = await stateOf(tx, input.destination);
        const tables = input.include_db ? (input.db_tables ?? Object.keys(source.db_tables)) : [];
        const next: repo.SimulatedState = {
          // C2: the destination is overwritten; the WordPress version travels with the files.
          wp_version: input.include_files ? source.wp_version : target.wp_version,
          file_bytes: input.include_files ? source.file_bytes : target.file_bytes,
          // C3: without db_tables the whole database, else only those tables (that exist).
          db_tables:
            input.db_tables === null && input.include_db
              ? { ...source.db_tables }
              : { ...target.db_tables, ...pick(source.db_tables, tables) },
        };
        await repo.saveState(tx, input.destination.id, next, now);
        return {
          wp_version: next.wp_version,
          copied_tables: Object.keys(pick(source.db_tables, tables)).sort(),
        };
      }),

    backup: (ctx: CallContext, install: InstallRef) =>
      call('backup', ctx, install.id, async (tx): Promise<Snapshot> => ({ ...(await stateOf(tx, install)) })),

    restore: (
      ctx: CallContext,
      input: { install: InstallRef; snapshot: Snapshot; restore_database: boolean },
    ) =>
      call('restore', ctx, input.install.id, async (tx, now) => {
        const current = await stateOf(tx, input.install);
        const next: repo.SimulatedState = {
          wp_version: input.snapshot.wp_version,
          file_bytes: input.snapshot.file_bytes,
          db_tables: input.restore_database ? { ...input.snapshot.db_tables } : current.db_tables,
        };
        await repo.saveState(tx, input.install.id, next, now);
        return { wp_version: next.wp_version };
      }),

    measureDisk: (ctx: CallContext, install: InstallRef) =>
      call('measure_disk', ctx, install.id, async (tx) => {
        const state = await stateOf(tx, install);
        return { file_bytes: state.file_bytes, database_bytes: dbBytes(state.db_tables) };
      }),

    purgeCache: (ctx: CallContext, input: { install_id: string; type: 'object' | 'page' | 'cdn' }) =>
      call('purge_cache', ctx, input.install_id, async () => ({})),

    moveSite: (
      ctx: CallContext,
      _input: { site_id: string; install_ids: string[]; destination_account_id: string },
    ) => call('move_site', ctx, null, async () => ({})),
  };
  return driver;
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
