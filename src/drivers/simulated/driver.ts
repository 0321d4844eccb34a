import { createHash, randomBytes } from 'node:crypto';
import { Type } from 'typebox';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { type Resealer, resealEach, type SecretBox } from '../../secrets.js';
import type {
  ArchiveSource,
  CallContext,
  CopyRequest,
  DriverOperation,
  DriverResult,
  HostingDriver,
  InstallRef,
  RoutingRequest,
  Snapshot,
} from '../driver.js';
import { tarOf } from '../tar.js';
import { TASK_RESULTS, type TaskResult, taskResults } from '../task-results.js';
import { CA_KEY_CONTEXT, issueSimulatedCertificate } from './ca.js';
import { takeInjectedFault } from './faults.js';
import * as repo from './simulated.repo.js';

export interface SimulatedDriverDeps {
  db: Db;
  clock: Clock;
  /** Seconds each operation takes, by the injected clock (SIMULATED_DURATIONS). */
  durations: Readonly<Record<DriverOperation, number>>;
  /** Seals the simulated CA's key and issued keys while they wait in simulated_tasks. */
  secretBox: SecretBox;
}

/**
 * What a simulated task records (checked where it is read, task-results.ts): the interface's answer,
 * except a certificate's key, which waits sealed (the result row is stored).
 */
const SIMULATED_TASK_RESULTS = {
  ...TASK_RESULTS,
  issue_certificate: Type.Object({ chain_pem: Type.String(), key_sealed: Type.String() }),
};
type SimulatedResult<K extends DriverOperation> = TaskResult<typeof SIMULATED_TASK_RESULTS, K>;
const resultOf = taskResults('simulated', SIMULATED_TASK_RESULTS);

/** What a simulated install reports when nothing else is known (its provisioning "installs" these). */
const SIMULATED_PHP_VERSION = '8.2';
const SIMULATED_WP_VERSION = '6.7.1';
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
export function createSimulatedDriver({ db, clock, durations, secretBox }: SimulatedDriverDeps) {
  const fault = (operation: DriverOperation, signal: AbortSignal) => takeInjectedFault(db, operation, signal);

  async function call<K extends DriverOperation>(
    operation: K,
    ctx: CallContext,
    installId: string | null,
    apply: (tx: Db, now: Date) => Promise<SimulatedResult<K>>,
  ): Promise<DriverResult<SimulatedResult<K>>> {
    await fault(operation, ctx.signal);
    const key = `${operation}:${ctx.key}`;
    const now = clock.now();
    const task = await repo.ensureTask(db, {
      key,
      operation,
      install_id: installId,
      ready_at: new Date(now.getTime() + durations[operation] * 1000),
      created_at: now,
    });
    if (task.applied_at) return { done: true, value: resultOf(operation, key, task.result) };
    if (now < task.ready_at) return { done: false, checkAt: task.ready_at };
    return withTransaction(db, async (tx) => {
      const locked = await repo.lockTask(tx, key);
      if (locked?.applied_at) return { done: true as const, value: resultOf(operation, key, locked.result) };
      const value = await apply(tx, now);
      await repo.markApplied(tx, key, value, now);
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
        // Issue 29 defect 9: a new install has no version until provisioning reports its own.
        const found = await stateOf(tx, install);
        const state = { ...found, wp_version: found.wp_version ?? SIMULATED_WP_VERSION };
        await repo.saveState(tx, install.id, state, now);
        return { wp_version: state.wp_version, php_version: SIMULATED_PHP_VERSION };
      }),

    copy: (ctx: CallContext, input: CopyRequest) =>
      call('copy', ctx, input.destination.id, async (tx, now) => {
        // Issue 30: a source on another server arrives as its backup.
        const snapshot = input.source_snapshot;
        const source = snapshot
          ? {
              wp_version: snapshot.wp_version,
              file_bytes: snapshot.file_bytes,
              db_tables: snapshot.db_tables,
            }
          : await stateOf(tx, input.source);
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

    // Issue 21: nothing is served; the task records the names the routing would serve (by its key).
    applyRouting: (ctx: CallContext, input: RoutingRequest) =>
      call('apply_routing', ctx, input.install.id, async () => ({
        names: [input.default_name, ...input.domains.map((d) => d.name)],
      })),

    // Issue 29: nothing serves WordPress here: a link of the right shape to a name that never resolves
    // (the API's answer says `simulated`).
    signInLink: async (_ctx: CallContext, input: { install: InstallRef; ttl_seconds: number }) => ({
      done: true as const,
      value: {
        url: `https://${input.install.name}.simulated.invalid/wp-login.php?hostplane_sign_in=${randomBytes(32).toString('base64url')}`,
        expires_at: new Date(clock.now().getTime() + input.ttl_seconds * 1000).toISOString(),
      },
    }),

    // The simulation keeps nothing outside its tables, which go with the install's row.
    deprovision: async () => ({ done: true as const, value: {} }),

    exportArchive: async (source: ArchiveSource) => simulatedArchive(source),

    // The task's result is stored (simulated_tasks.result): the key goes there sealed, never as PEM.
    async issueCertificate(ctx: CallContext, input: { install: InstallRef; names: string[] }) {
      const context = taskKeyContext(ctx.key);
      const result = await call('issue_certificate', ctx, input.install.id, async (tx, now) => {
        const issued = await issueSimulatedCertificate(tx, secretBox, { names: input.names, now });
        return {
          chain_pem: issued.chain_pem,
          key_sealed: secretBox.seal(Buffer.from(issued.key_pem), context),
        };
      });
      if (!result.done) return result;
      const key_pem = secretBox.open(result.value.key_sealed, context).toString('utf8');
      return { done: true as const, value: { chain_pem: result.value.chain_pem, key_pem } };
    },
  };
  return driver;
}

/**
 * A simulated backup holds no files, so its archive says so: a tar.gz with a README and the backup's
 * manifest (what the snapshot records), never anything that looks like a real site.
 */
function simulatedArchive({ install, backup }: ArchiveSource) {
  const mtime = backup.completed_at;
  const manifest = {
    simulated: true,
    install: { id: install.id, name: install.name },
    backup: {
      id: backup.id,
      description: backup.description,
      completed_at: backup.completed_at.toISOString(),
      wordpress_version: backup.snapshot.wp_version,
      file_bytes: backup.snapshot.file_bytes,
      database_tables: backup.snapshot.db_tables,
    },
  };
  const readme =
    'This archive was made by the simulated hosting driver of Hostplane (HOSTING_DRIVER=simulated).\n' +
    'No site exists behind it, so it holds no files and no database: manifest.json lists what the\n' +
    'simulated backup recorded (sizes per table, file bytes, WordPress version).\n';
  return {
    fileName: `${install.name}-${backup.id}.tar`,
    contentType: 'application/x-tar',
    ...tarOf([
      { name: 'README.txt', content: Buffer.from(readme, 'utf8'), mtime },
      {
        name: 'manifest.json',
        content: Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8'),
        mtime,
      },
    ]),
  };
}

/** What the key of an issued certificate, stored in its task's result, is sealed for (the call's key). */
const taskKeyContext = (callKey: string) => `simulated-task:issue_certificate:${callKey}`;
const TASK_PREFIX = 'issue_certificate:';

/** `hostplane reseal`: the simulated driver's sealed keys (its CA's, its issued certificates'), inside `tx`. */
export async function resealSimulatedSecrets(tx: Db, reseal: Resealer) {
  const { cas, tasks } = await repo.sealedValues(tx);
  const count = await resealEach(
    cas,
    reseal,
    (ca) => ({ sealed: ca.sealed, context: CA_KEY_CONTEXT }),
    (ca, next) => repo.setCaKey(tx, ca.id, next),
  );
  // Task rows are keyed `<operation>:<call key>` (see `call`).
  const issued = tasks
    .filter((task) => task.key.startsWith(TASK_PREFIX))
    .map((task) => ({ key: task.key, result: resultOf('issue_certificate', task.key, task.result) }));
  return resealEach(
    issued,
    reseal,
    (task) => ({
      sealed: task.result.key_sealed,
      context: taskKeyContext(task.key.slice(TASK_PREFIX.length)),
    }),
    (task, next) => repo.setTaskResult(tx, task.key, { ...task.result, key_sealed: next }),
    count,
  );
}
