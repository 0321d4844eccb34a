import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Resealer, SecretBox } from '../../secrets.js';
import {
  type ArchiveSource,
  type CallContext,
  type CopyRequest,
  DriverError,
  type DriverOperation,
  type DriverResult,
  type HostingDriver,
  type InstallRef,
  type Snapshot,
} from '../driver.js';
import { tarGz } from '../tar.js';
import type { MariaDb } from './database.js';
import * as files from './files.js';
import { createLimiter } from './limiter.js';
import * as repo from './local.repo.js';

export interface LocalDriverDeps {
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  mariadb: MariaDb;
  /** HOSTING_ROOT: installs/, backups/ and staging/ live under it. */
  hostingRoot: string;
  /** LOCAL_MAX_HEAVY_OPERATIONS: backups, restores and copies running at once in this process. */
  maxHeavy: number;
  /** Certificates still come from the built-in private CA (the simulated driver's). */
  issueCertificate: HostingDriver['issueCertificate'];
  /**
   * Test mode (HOSTPLANE_FAULTS=on): called half-way through a backup, restore or copy (its staging
   * done, nothing swapped), where an injected fault fails or hangs it. Default: nothing.
   */
  midway?: (operation: DriverOperation, signal: AbortSignal) => Promise<void>;
}

/** What a backup directory holds next to its two artefacts (written last: its presence means done). */
interface Manifest {
  format: 1;
  install_id: string;
  key: string;
  created_at: string;
  wp_version: string | null;
  files: { archive: string; tree_bytes: number; archive_bytes: number; sha256: string };
  database: { dump: string; dump_bytes: number; sha256: string; tables: Record<string, number> };
}

const FILES_ARCHIVE = 'files.tar.gz';
const DB_DUMP = 'database.sql';
const MANIFEST = 'manifest.json';
/** Where a snapshot's backup lives, relative to HOSTING_ROOT/backups (checked before use). */
const LOCATION = /^hp_[0-9a-f]{32}\/[0-9a-f-]{36}(\.[a-z]{1,32})?$/;

const ESTIMATES: Record<DriverOperation, number> = {
  provision: 5,
  copy: 60,
  backup: 60,
  restore: 60,
  measure_disk: 10,
  purge_cache: 1,
  move_site: 1,
  issue_certificate: 5,
  deprovision: 5,
};

/**
 * HOSTING_DRIVER=local: installs as real directories under HOSTING_ROOT and real MariaDB databases.
 * Each call does its work before it answers (no "ask again"), inside the job's time (`ctx.signal`
 * stops the tools it spawned). Keyed: finished work is recorded per key (local_tasks) and a repeated
 * key answers the recorded result; unfinished work is redone from the start after cleaning what an
 * interrupted attempt left (temporary directories, staging databases, a half-done swap). Heavy work
 * (backup, restore, copy) stages everything first and swaps at the end, so a failure leaves the
 * install as it was.
 */
export function createLocalDriver(deps: LocalDriverDeps): HostingDriver & {
  countCompleted(installId: string, operation: DriverOperation): Promise<number>;
  accountOf(installId: string): Promise<{ db_name: string; db_user: string; password: string } | null>;
} {
  const { db, clock, mariadb, hostingRoot } = deps;
  const heavy = createLimiter(deps.maxHeavy);
  const midway = deps.midway ?? (async () => undefined);
  /** Work on one install runs one call at a time in this process (staging names are per install). */
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

  async function once<T>(
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
  }

  const names = (installId: string) => {
    const slug = files.installSlug(installId);
    return { db: slug, user: slug, staging: slug.replace('hp_', 'hps_'), trash: slug.replace('hp_', 'hpt_') };
  };
  const stagingDir = (installId: string, key: string) =>
    path.join(hostingRoot, 'staging', `${files.installSlug(installId)}.${files.keySlug(key)}`);

  /** Before any work on an install: undo a half-done swap of its document root. */
  const recover = (installId: string) => files.recoverSwap(files.pathsOf(hostingRoot, installId).public);

  async function account(installId: string) {
    const row = await repo.findInstall(db, installId);
    if (!row) return null;
    const password = deps.secretBox.open(row.password_sealed, passwordContext(installId)).toString('utf8');
    return { db_name: row.db_name, db_user: row.db_user, password };
  }

  /** Replaces `tables` (null: all) of the install's database with those loaded into its staging one. */
  async function swapTables(installId: string, only: string[] | null) {
    const n = names(installId);
    const incoming = Object.keys(await mariadb.tablesOf(n.staging));
    const live = Object.keys(await mariadb.tablesOf(n.db));
    const outgoing = only === null ? live : live.filter((t) => incoming.includes(t) || only.includes(t));
    await mariadb.dropDatabase(n.trash);
    await mariadb.createDatabase(n.trash);
    await mariadb.renameTables([
      ...outgoing.map((t): [string, string, string, string] => [n.db, t, n.trash, t]),
      ...incoming.map((t): [string, string, string, string] => [n.staging, t, n.db, t]),
    ]);
    await mariadb.dropDatabase(n.trash);
    await mariadb.dropDatabase(n.staging);
    return incoming.sort();
  }

  /** Loads a dump into the install's (fresh) staging database. */
  async function stageDatabase(installId: string, dump: string, signal: AbortSignal) {
    const n = names(installId);
    await mariadb.dropDatabase(n.staging);
    await mariadb.createDatabase(n.staging);
    await mariadb.load(n.staging, dump, signal);
  }

  /** A copy's slow part, in staging: the source's document root and the dump of its tables, loaded. */
  async function stageCopy(input: CopyRequest, staging: string, signal: AbortSignal) {
    const { source, destination } = input;
    const from = files.pathsOf(hostingRoot, source.id);
    const sourceTables = Object.keys(await mariadb.tablesOf(names(source.id).db));
    // C3: only tables that exist in the source (a named table that does not is skipped).
    const tables = input.db_tables === null ? null : input.db_tables.filter((t) => sourceTables.includes(t));
    if (input.include_files) await fs.cp(from.public, path.join(staging, 'public'), { recursive: true });
    const dbWork = input.include_db && (tables === null || tables.length > 0);
    if (dbWork) {
      const dump = path.join(staging, DB_DUMP);
      await mariadb.dump(names(source.id).db, dump, signal, tables);
      await stageDatabase(destination.id, dump, signal);
    }
    await midway('copy', signal);
    return { dbWork, tables };
  }

  /** After a failed attempt: its staging directory and database go (the live install was not touched). */
  async function discardStaging(installId: string, staging: string) {
    await files.remove(staging).catch(() => undefined);
    await mariadb.dropDatabase(names(installId).staging).catch(() => undefined);
  }

  function backupDir(location: string) {
    if (!LOCATION.test(location)) throw new Error(`not a local backup location: ${JSON.stringify(location)}`);
    return path.join(hostingRoot, 'backups', location);
  }

  async function readManifest(dir: string): Promise<Manifest | null> {
    try {
      return JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8')) as Manifest;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  const snapshotOf = (manifest: Manifest, location: string): Snapshot => ({
    wp_version: manifest.wp_version,
    file_bytes: manifest.files.tree_bytes,
    db_tables: manifest.database.tables,
    location,
    checksums: { files: manifest.files.sha256, database: manifest.database.sha256 },
  });

  async function takeBackup(install: InstallRef, key: string, signal: AbortSignal): Promise<Snapshot> {
    const paths = files.pathsOf(hostingRoot, install.id);
    const location = `${files.installSlug(install.id)}/${files.keySlug(key)}`;
    const dir = backupDir(location);
    const finished = await readManifest(dir);
    if (finished) return snapshotOf(finished, location);
    // Written under a temporary name, renamed when complete: a crash leaves only the temporary one.
    const tmp = path.join(paths.backups, `.tmp-${files.keySlug(key)}`);
    await files.remove(tmp);
    await fs.mkdir(tmp, { recursive: true });
    const n = names(install.id);
    await files.tarDirectory(paths.public, path.join(tmp, FILES_ARCHIVE), signal);
    await midway('backup', signal);
    await mariadb.dump(n.db, path.join(tmp, DB_DUMP), signal);
    const manifest: Manifest = {
      format: 1,
      install_id: install.id,
      key,
      created_at: clock.now().toISOString(),
      wp_version: await files.readWpVersion(paths.public),
      files: {
        archive: FILES_ARCHIVE,
        tree_bytes: await files.treeBytes(paths.public),
        archive_bytes: (await fs.stat(path.join(tmp, FILES_ARCHIVE))).size,
        sha256: await files.sha256File(path.join(tmp, FILES_ARCHIVE)),
      },
      database: {
        dump: DB_DUMP,
        dump_bytes: (await fs.stat(path.join(tmp, DB_DUMP))).size,
        sha256: await files.sha256File(path.join(tmp, DB_DUMP)),
        tables: await mariadb.tablesOf(n.db),
      },
    };
    await fs.writeFile(path.join(tmp, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    await fs.rename(tmp, dir);
    return snapshotOf(manifest, location);
  }

  /** A backup's directory with its artefacts checked against the manifest's checksums. */
  async function verifiedBackup(snapshot: Snapshot) {
    if (!snapshot.location) throw new Error('the backup was not made by the local driver; it holds no files');
    const dir = backupDir(snapshot.location);
    const manifest = await readManifest(dir);
    if (!manifest) throw new Error(`backup ${snapshot.location} is missing its manifest`);
    const archive = path.join(dir, FILES_ARCHIVE);
    const dump = path.join(dir, DB_DUMP);
    if ((await files.sha256File(archive)) !== manifest.files.sha256)
      throw new Error(`backup ${snapshot.location}: the files archive does not match its checksum`);
    if ((await files.sha256File(dump)) !== manifest.database.sha256)
      throw new Error(`backup ${snapshot.location}: the database dump does not match its checksum`);
    return { dir, manifest, archive, dump };
  }

  const driver = {
    name: 'local',

    estimateSeconds: (operation: DriverOperation) => ESTIMATES[operation],

    provision: (ctx: CallContext, install: InstallRef) =>
      once('provision', ctx, [install.id], async () => {
        const paths = files.pathsOf(hostingRoot, install.id);
        const n = names(install.id);
        const password = Buffer.from(randomBytes(24).toString('base64url'));
        const sealed = deps.secretBox.seal(password, passwordContext(install.id));
        // A first attempt's password is kept: the row is inserted once, then read back.
        await repo.insertInstall(db, {
          install_id: install.id,
          db_name: n.db,
          db_user: n.user,
          password_sealed: sealed,
        });
        const acc = await account(install.id);
        if (!acc) throw new Error('the install account vanished');
        await mariadb.createAccount(n.db, n.user, acc.password);
        await files.createInstallDirs(paths);
        return {
          wp_version: await files.readWpVersion(paths.public),
          php_version: await files.readPhpVersion(paths.private),
        };
      }),

    backup: (ctx: CallContext, install: InstallRef) =>
      once(
        'backup',
        ctx,
        [install.id],
        async () => {
          await recover(install.id);
          return takeBackup(install, ctx.key, ctx.signal);
        },
        true,
      ),

    restore: (
      ctx: CallContext,
      input: { install: InstallRef; snapshot: Snapshot; restore_database: boolean },
    ) =>
      once(
        'restore',
        ctx,
        [input.install.id],
        async () => {
          const id = input.install.id;
          await recover(id);
          const backup = await verifiedBackup(input.snapshot);
          const staging = stagingDir(id, ctx.key);
          await files.remove(staging);
          // Everything slow happens in staging; the swaps at the end are renames.
          try {
            await files.untar(backup.archive, staging, ctx.signal);
            if (input.restore_database) await stageDatabase(id, backup.dump, ctx.signal);
            await midway('restore', ctx.signal);
          } catch (err) {
            await discardStaging(id, staging);
            throw err;
          }
          await files.swapIn(files.pathsOf(hostingRoot, id).public, staging);
          if (input.restore_database) await swapTables(id, null);
          return { wp_version: backup.manifest.wp_version };
        },
        true,
      ),

    copy: (ctx: CallContext, input: CopyRequest) =>
      once(
        'copy',
        ctx,
        [input.destination.id, input.source.id].filter((v, i, a) => a.indexOf(v) === i),
        async () => {
          const { source, destination } = input;
          await recover(source.id);
          await recover(destination.id);
          const to = files.pathsOf(hostingRoot, destination.id);
          const staging = stagingDir(destination.id, ctx.key);
          await files.remove(staging);
          await fs.mkdir(staging, { recursive: true });
          const staged = await stageCopy(input, staging, ctx.signal).catch(async (err) => {
            await discardStaging(destination.id, staging);
            throw err;
          });
          if (input.include_files) await files.swapIn(to.public, path.join(staging, 'public'));
          const copied = staged.dbWork ? await swapTables(destination.id, staged.tables) : [];
          await files.remove(staging);
          return {
            wp_version: input.include_files ? await files.readWpVersion(to.public) : destination.wp_version,
            copied_tables: copied,
          };
        },
        true,
      ),

    measureDisk: (ctx: CallContext, install: InstallRef) =>
      once('measure_disk', ctx, [install.id], async () => ({
        file_bytes: await files.treeBytes(files.pathsOf(hostingRoot, install.id).root),
        database_bytes: await mariadb.databaseBytes(names(install.id).db),
      })),

    purgeCache: (ctx: CallContext, input: { install_id: string; type: 'object' | 'page' | 'cdn' }) =>
      once('purge_cache', ctx, [input.install_id], async () => {
        const { cache } = files.pathsOf(hostingRoot, input.install_id);
        await files.remove(cache);
        await fs.mkdir(cache, { recursive: true });
        return {} as Record<string, never>;
      }),

    // One host: nothing moves; the call is recorded (local_tasks) like every other.
    moveSite: (
      ctx: CallContext,
      _input: { site_id: string; install_ids: string[]; destination_account_id: string },
    ) => once('move_site', ctx, [], async () => ({}) as Record<string, never>),

    issueCertificate: (ctx: CallContext, input: { install: InstallRef; names: string[] }) =>
      deps.issueCertificate(ctx, input),

    deprovision: (ctx: CallContext, install: InstallRef) =>
      once('deprovision', ctx, [install.id], async () => {
        const n = names(install.id);
        const paths = files.pathsOf(hostingRoot, install.id);
        await mariadb.dropAccount(n.db, n.user);
        await mariadb.dropDatabase(n.staging);
        await mariadb.dropDatabase(n.trash);
        await files.remove(paths.root);
        await files.remove(`${paths.public}.old`);
        await files.remove(paths.backups);
        await repo.deleteTasksOf(db, install.id);
        await repo.deleteInstall(db, install.id);
        return {} as Record<string, never>;
      }),

    /** The backup's three artefacts (files archive, database dump, manifest) in one tar.gz. */
    async exportArchive({ install, backup }: ArchiveSource) {
      const { dir } = await verifiedBackup(backup.snapshot);
      const mtime = backup.completed_at;
      const entries = await Promise.all(
        [MANIFEST, DB_DUMP, FILES_ARCHIVE].map(async (name) => ({
          name,
          content: await fs.readFile(path.join(dir, name)),
          mtime,
        })),
      );
      return {
        fileName: `${install.name}-${backup.id}.tar.gz`,
        contentType: 'application/gzip',
        body: tarGz(entries),
      };
    },

    close: () => mariadb.close(),

    countCompleted: (installId: string, operation: DriverOperation) =>
      repo.countCompleted(db, installId, operation),
    accountOf: account,
  };
  return driver;
}

/** What an install's database password is sealed for. */
const passwordContext = (installId: string) => `local-install:${installId}`;

/**
 * `hostplane reseal` (key rotation): the local driver's sealed values are the installs' database
 * passwords. Runs in the caller's transaction, whichever driver is configured (the table is empty
 * when the local driver was never used).
 */
export async function resealLocalSecrets(tx: Db, reseal: Resealer) {
  let resealed = 0;
  let current = 0;
  for (const row of await repo.sealedPasswords(tx)) {
    const next = reseal(row.sealed, passwordContext(row.install_id));
    if (next === null) current++;
    else {
      await repo.setPassword(tx, row.install_id, next);
      resealed++;
    }
  }
  return { resealed, current };
}
