import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import type { Readable } from 'node:stream';
import {
  type ArchiveSource,
  type BackupRequest,
  type CallContext,
  DriverError,
  type HostingDriver,
  type Snapshot,
} from '../driver.js';
import { type TarEntry, tarSize, tarStream } from '../tar.js';
import { extractTar } from '../tar-read.js';
import { openBackupFile } from './archive-files.js';
import type { LocalContext } from './context.js';
import type { Trigger } from './database.js';
import * as files from './files.js';
import { accountOf } from './installs.js';
import { databaseNames, installSlug, keySlug, pathsOf, stagingDir } from './names.js';
import { allOrAbort } from './run.js';
import { discardOnFailure, recover, stageDatabase, swapStaged } from './staging.js';
import * as tenant from './tenant.js';
import {
  diffIndex,
  type ExpectedEntry,
  expectedOf,
  indexFromRows,
  indexRows,
  parseIndex,
  sameIndex,
  type TreeIndex,
  treeMismatch,
} from './tree-index.js';

/**
 * Backups, restores and the backups' downloadable archives. A backup is a directory under
 * HOSTING_ROOT/backups/hp_<hex>/<key>: the document root as a tar.gz, a `mariadb-dump` of the
 * database, and a manifest with both SHA-256 sums, written under a temporary name and renamed when
 * complete. A restore checks the sums, stages the tree and the database, then swaps (staging.ts).
 */

/** What a backup directory holds next to its two artefacts (written last: its presence means done). */
interface Manifest {
  format: 1;
  install_id: string;
  key: string;
  created_at: string;
  wp_version: string | null;
  files: { archive: string; tree_bytes: number; archive_bytes: number; sha256: string };
  database: { dump: string; dump_bytes: number; sha256: string; tables: Record<string, number> };
  /** Issue 30 (decision #235): the tree's index taken before the archive, kept beside it (index_files). */
  index?: string;
  /** Issue 30 (decision #235): an incremental backup: what changed since the backup at `base`. */
  delta?: Delta;
}

/** What an incremental backup (a move's final sync) holds besides its changed files and tables. */
interface Delta {
  /** The backup the changes are taken since (its location, on the source). */
  base: string;
  /** Entries the target removes before the changed ones are extracted (tree-index.ts diffIndex). */
  remove: string[];
  /** Tables in the dump (rows, definition or triggers changed), dropped, and kept (with the target's own fingerprints, checked). */
  tables: { changed: string[]; dropped: string[]; kept: Record<string, string> };
  /** The source's whole tree as it was (what the target must hold after, tree-index.ts treeMismatch). */
  expected: ExpectedEntry[];
  /** SHA-256 of the dump of the changed tables (dumpSha256), and their triggers' fingerprints (the third part of mariadb.fingerprints). */
  dump_sha256: string;
  triggers: Record<string, string>;
}

/**
 * SHA-256 of a dump's tables (definitions and rows), decision #235: its comments (the server's name
 * and version, the database's) and its trigger blocks (as each server defines them again; compared
 * by their fingerprints) left out.
 */
async function dumpSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  let triggers = false;
  for await (const line of readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (line === 'DELIMITER ;;') triggers = true;
    else if (line === 'DELIMITER ;') triggers = false;
    else if (!triggers && !line.startsWith('-- ')) hash.update(`${line}\n`);
  }
  return hash.digest('hex');
}

const FILES_ARCHIVE = 'files.tar.gz';
const DB_DUMP = 'database.sql';
const MANIFEST = 'manifest.json';
/** The tree's index a backup asked with `index_files` keeps (root's only, never exported). */
const INDEX = 'index.json';
/** The target's own wp-config.php (written for its database by the restore): not compared with the source's. */
const TARGET_OWN = new Set(['wp-config.php']);
/** Where a snapshot's backup lives, relative to HOSTING_ROOT/backups (checked before use). */
const LOCATION = /^hp_[0-9a-f]{32}\/(move\.)?[0-9a-f-]{36}(\.[a-z][a-z-]{0,31})?$/;

/** Where a backup's files are (its snapshot's `location`, checked). */
export function backupDirOf(hostingRoot: string, location: string) {
  if (!LOCATION.test(location)) throw new Error(`not a local backup location: ${JSON.stringify(location)}`);
  return path.join(hostingRoot, 'backups', location);
}

/**
 * A backup's directory with its artefacts checked against the manifest's checksums, and the
 * manifest's against the snapshot's (issue 30: an imported backup is what its server recorded).
 */
export async function verifiedBackupAt(hostingRoot: string, snapshot: Snapshot) {
  if (!snapshot.location) throw new Error('the backup was not made by the local driver; it holds no files');
  const dir = backupDirOf(hostingRoot, snapshot.location);
  const manifest = await readManifest(dir);
  if (!manifest) throw new Error(`backup ${snapshot.location} is missing its manifest`);
  if (
    snapshot.checksums &&
    (snapshot.checksums.files !== manifest.files.sha256 ||
      snapshot.checksums.database !== manifest.database.sha256)
  )
    throw new Error(`backup ${snapshot.location}: its manifest is not the snapshot's backup`);
  const archive = path.join(dir, FILES_ARCHIVE);
  const dump = path.join(dir, DB_DUMP);
  if ((await files.sha256File(archive)) !== manifest.files.sha256)
    throw new Error(`backup ${snapshot.location}: the files archive does not match its checksum`);
  if ((await files.sha256File(dump)) !== manifest.database.sha256)
    throw new Error(`backup ${snapshot.location}: the database dump does not match its checksum`);
  return { dir, manifest, archive, dump };
}

/** Issue 30: an imported backup (importBackup) is removed once the restore or copy it fed is done. */
export async function removeImported(hostingRoot: string, snapshot: Snapshot) {
  if (snapshot.location?.endsWith(IMPORTED))
    await files.remove(backupDirOf(hostingRoot, snapshot.location)).catch(() => undefined);
}

const IMPORTED = '.imported';
/** Issue 30 (decision #226): a backup a move carried here; nothing removes it but the install's deprovision. */
const CARRIED = '.carried';

export function backupOperations(
  ctx: LocalContext,
): Pick<HostingDriver, 'backup' | 'restore' | 'exportArchive' | 'importBackup'> {
  const { clock, mariadb, hostingRoot, midway, once } = ctx;

  const backupDir = (location: string) => backupDirOf(hostingRoot, location);

  /** A root-only temporary directory in the install's backups (0700), emptied first. */
  async function rootTemp(installId: string, name: string, signal: AbortSignal) {
    const backups = pathsOf(hostingRoot, installId).backups;
    const tmp = path.join(backups, name);
    await files.remove(tmp, signal);
    // Issue 28: backups are root's only (directories 0700, files 0600): they hold wp-config.php.
    for (const dir of [path.dirname(backups), backups, tmp]) {
      await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      await fs.chmod(dir, 0o700);
    }
    return tmp;
  }

  async function takeBackup(install: BackupRequest, key: string, signal: AbortSignal): Promise<Snapshot> {
    const paths = pathsOf(hostingRoot, install.id);
    const location = `${installSlug(install.id)}/${keySlug(key)}`;
    const dir = backupDir(location);
    const finished = await readManifest(dir);
    if (finished) return snapshotOf(finished, location);
    // Written under a temporary name, renamed when complete: a crash leaves only the temporary one.
    const tmp = await rootTemp(install.id, `.tmp-${keySlug(key)}`, signal);
    const n = databaseNames(install.id);
    const archive = path.join(tmp, FILES_ARCHIVE);
    const dump = path.join(tmp, DB_DUMP);
    const since = install.changes_since ? await baseIndexOf(install.changes_since.location) : null;
    let delta: Delta | undefined;
    if (since && install.changes_since) {
      delta = await takeChanges(install.id, since, install.changes_since, archive, dump, signal);
    } else {
      // Decision #235: the index first, so that whatever changes during the archive differs from it.
      // A tree too big to index (or one find cannot read) keeps none: the final sync is then whole.
      if (install.index_files) {
        const owner = (await tenant.ownerOf(paths.public)) ?? tenant.ROOT;
        const index = await tenant
          .indexTree(owner, paths.public, signal)
          .then(parseIndex)
          .catch((err: unknown) => {
            if (signal.aborted) throw err;
            return null;
          });
        if (index)
          await fs.writeFile(path.join(tmp, INDEX), JSON.stringify(indexRows(index)), { mode: 0o600 });
      }
      // The files' tar+gzip and the database's dump are independent processes: side by side (one
      // core each), so a backup takes the longer of the two, not their sum (bench/README.md, issue 21).
      await allOrAbort(signal, [
        (s) => files.tarDirectory(paths.public, archive, s),
        (s) => mariadb.dump(n.db, dump, s),
      ]);
    }
    await midway('backup', signal);
    const [wpVersion, treeBytes, archiveStat, archiveSum, dumpStat, dumpSum, tables] = await Promise.all([
      files.readWpVersion(paths.public, signal),
      files.treeBytes(paths.public, signal),
      fs.stat(archive),
      files.sha256File(archive),
      fs.stat(dump),
      files.sha256File(dump),
      mariadb.tablesOf(n.db),
    ]);
    const manifest: Manifest = {
      format: 1,
      install_id: install.id,
      key,
      created_at: clock.now().toISOString(),
      wp_version: wpVersion,
      files: {
        archive: FILES_ARCHIVE,
        tree_bytes: treeBytes,
        archive_bytes: archiveStat.size,
        sha256: archiveSum,
      },
      database: { dump: DB_DUMP, dump_bytes: dumpStat.size, sha256: dumpSum, tables },
      ...(!delta && (await files.exists(path.join(tmp, INDEX))) && { index: INDEX }),
      ...(delta && { delta }),
    };
    // An incremental backup's manifest lists the whole tree: written compact.
    const text = delta ? JSON.stringify(manifest) : JSON.stringify(manifest, null, 2);
    await fs.writeFile(path.join(tmp, MANIFEST), `${text}\n`, { mode: 0o600 });
    for (const name of [FILES_ARCHIVE, DB_DUMP, MANIFEST]) await fs.chmod(path.join(tmp, name), 0o600);
    await fs.rename(tmp, dir);
    return snapshotOf(manifest, location);
  }

  /** The index the backup at `location` kept (null: it kept none, or it is gone: a whole backup is taken). */
  async function baseIndexOf(location: string) {
    const dir = backupDir(location);
    const manifest = await readManifest(dir);
    if (!manifest?.index) return null;
    return indexFromRows(JSON.parse(await fs.readFile(path.join(dir, INDEX), 'utf8')));
  }

  /**
   * Decision #235, on the source (its writes frozen): the tree indexed and the tables fingerprinted
   * first (as the copy's backup did), then only what differs archived and dumped, side by side.
   */
  async function takeChanges(
    installId: string,
    base: TreeIndex,
    { location, tables: targetTables }: NonNullable<BackupRequest['changes_since']>,
    archive: string,
    dump: string,
    signal: AbortSignal,
  ): Promise<Delta> {
    const live = pathsOf(hostingRoot, installId).public;
    const owner = (await tenant.ownerOf(live)) ?? tenant.ROOT;
    const n = databaseNames(installId);
    const indexNow = async () => parseIndex(await tenant.indexTree(owner, live, signal));
    let [now, prints] = await Promise.all([indexNow(), mariadb.fingerprints(n.db)]);
    let remove: string[] = [];
    let changed: string[] = [];
    // Reads still run during the freeze (a plugin may write a cache file): when the tree changed while
    // it was archived, the changes are taken again (a few times), so that the list the target is
    // checked against is the tree the archive holds.
    for (let attempt = 1; ; attempt++) {
      const diff = diffIndex(base, now);
      remove = diff.remove;
      changed = Object.keys(prints)
        .filter((t) => prints[t] !== targetTables[t])
        .sort();
      const tables = changed;
      for (const file of [archive, dump]) await fs.rm(file, { force: true });
      await allOrAbort(signal, [
        (s) => tenant.archivePaths(owner, live, diff.send, archive, s),
        (s) =>
          tables.length > 0 ? mariadb.dump(n.db, dump, s, tables) : fs.writeFile(dump, '', { mode: 0o600 }),
      ]);
      const after = await indexNow();
      if (sameIndex(now, after) || attempt >= 3) break;
      [now, prints] = [after, await mariadb.fingerprints(n.db)];
    }
    const dropped = Object.keys(targetTables)
      .filter((t) => !Object.hasOwn(prints, t))
      .sort();
    const kept = Object.fromEntries(Object.entries(prints).filter(([t, print]) => print === targetTables[t]));
    return {
      base: location,
      remove,
      tables: { changed, dropped, kept },
      expected: expectedOf(now),
      dump_sha256: await dumpSha256(dump),
      triggers: Object.fromEntries(changed.map((t) => [t, triggersPart(prints[t])])),
    };
  }

  const verifiedBackup = (snapshot: Snapshot) => verifiedBackupAt(hostingRoot, snapshot);
  type VerifiedBackup = Awaited<ReturnType<typeof verifiedBackup>>;

  /**
   * Decision #235, on the target (not serving the install yet; its tree and tables are the copy the
   * changes were taken against): the entries gone or retyped removed and the changed ones extracted,
   * both as the tree's owner, in the live tree; the changed tables staged and swapped in, the dropped
   * ones dropped; then the whole install checked against the source as it was: every file, directory
   * and link (tree-index.ts treeMismatch), the kept tables' fingerprints as the copy left them, the
   * changed tables dumped again to the source's dump's SHA-256. A mismatch fails for good (the move
   * rolls back). A retry does the same work again over the same changes (each step converges).
   */
  async function applyChanges(
    id: string,
    backup: VerifiedBackup,
    delta: Delta,
    restoreDatabase: boolean,
    call: CallContext,
  ) {
    const live = pathsOf(hostingRoot, id).public;
    const owner = await tenant.ownerOf(live);
    if (!owner) throw new DriverError('restore', 'the install has no copy here to apply changes to', true);
    const n = databaseNames(id);
    await tenant.removePaths(owner, live, delta.remove, call.signal);
    // Its directories are the new ones and those whose mode changed: their modes are applied.
    await tenant.extractArchive(owner, backup.archive, live, 'restore', call.signal, true);
    await ctx.web?.adopt(id, live, await accountOf(ctx, id), call.signal);
    const { changed, dropped, kept } = delta.tables;
    if (restoreDatabase && changed.length > 0) {
      const staging = stagingDir(hostingRoot, id, call.key);
      const triggers = await discardOnFailure(ctx, id, staging, () =>
        stageDatabase(ctx, id, backup.dump, call.signal),
      );
      await swapStaged(
        ctx,
        id,
        {
          operation: 'restore',
          key: call.key,
          staging,
          tree: null,
          tables: { only: [...changed, ...dropped], triggers },
        },
        call.signal,
      );
    } else if (restoreDatabase) await mariadb.dropTables(n.db, dropped);
    await midway('restore', call.signal);
    const [actual, prints] = await Promise.all([
      tenant.indexTree(owner, live, call.signal).then(parseIndex),
      mariadb.fingerprints(n.db),
    ]);
    const wrong = treeMismatch(delta.expected, actual, TARGET_OWN);
    if (restoreDatabase) {
      const names = Object.keys(prints).sort();
      const want = [...Object.keys(kept), ...changed].sort();
      if (names.join('\0') !== want.join('\0'))
        wrong.push(`the tables are ${JSON.stringify(names)} here, ${JSON.stringify(want)} on the source`);
      for (const [table, print] of Object.entries(kept))
        if (prints[table] !== print) wrong.push(`table ${JSON.stringify(table)} changed here since the copy`);
      for (const table of changed)
        if (triggersPart(prints[table]) !== delta.triggers[table])
          wrong.push(`the triggers of table ${JSON.stringify(table)} differ from the source's`);
      if (changed.length > 0) {
        const tmp = await rootTemp(id, `.tmp-check-${keySlug(call.key)}`, call.signal);
        try {
          const again = path.join(tmp, DB_DUMP);
          await mariadb.dump(n.db, again, call.signal, changed);
          if ((await dumpSha256(again)) !== delta.dump_sha256)
            wrong.push(`the changed tables ${JSON.stringify(changed)} do not dump as the source's did`);
        } finally {
          await files.remove(tmp).catch(() => undefined);
        }
      }
    }
    if (wrong.length > 0)
      throw new DriverError(
        'restore',
        `the copy here does not match the source after its changes: ${wrong.slice(0, 5).join('; ')}`,
        true,
      );
  }

  /**
   * A whole backup restored: the tree extracted by its install's owner into staging, the tables
   * staged, then both swapped in, all or nothing (staging.ts).
   */
  async function restoreWhole(
    id: string,
    backup: VerifiedBackup,
    restoreDatabase: boolean,
    call: CallContext,
  ) {
    const live = pathsOf(hostingRoot, id).public;
    const staging = stagingDir(hostingRoot, id, call.key);
    await files.remove(staging, call.signal);
    // Issue 28: the tree is extracted by its install's owner (the live tree's) into a directory
    // only that owner and root reach; root only pipes its own archive in (tenant.ts).
    const owner = (await tenant.ownerOf(live)) ?? tenant.ROOT;
    const mode = (await fs.lstat(live).catch(() => null))?.mode ?? 0o750;
    // Everything slow happens in staging; the swaps at the end are renames.
    const triggers = await discardOnFailure(ctx, id, staging, async () => {
      await tenant.makeTreeDir(staging, owner);
      await tenant.extractArchive(owner, backup.archive, staging, 'restore', call.signal);
      const staged: Trigger[] = restoreDatabase ? await stageDatabase(ctx, id, backup.dump, call.signal) : [];
      await ctx.web?.adopt(id, staging, await accountOf(ctx, id), call.signal);
      await tenant.settleTreeDir(staging, mode);
      await midway('restore', call.signal);
      return staged;
    });
    // Issue 28 finding 7: tables then files, all or nothing (staging.ts).
    await swapStaged(
      ctx,
      id,
      {
        operation: 'restore',
        key: call.key,
        staging,
        tree: staging,
        tables: restoreDatabase ? { only: null, triggers } : null,
      },
      call.signal,
    );
  }

  return {
    backup: (call: CallContext, install: BackupRequest) =>
      once(
        'backup',
        call,
        [install.id],
        async () => {
          await recover(ctx, install.id, call.signal);
          return takeBackup(install, call.key, call.signal);
        },
        true,
      ),

    restore: (call: CallContext, input: Parameters<HostingDriver['restore']>[1]) =>
      once(
        'restore',
        call,
        [input.install.id],
        async () => {
          const id = input.install.id;
          await recover(ctx, id, call.signal);
          const backup = await verifiedBackup(input.snapshot);
          const { delta } = backup.manifest;
          if (delta) await applyChanges(id, backup, delta, input.restore_database, call);
          else await restoreWhole(id, backup, input.restore_database, call);
          // Issue 21: the page cache holds pages of before the restore.
          await ctx.web?.purgePage(id);
          await removeImported(hostingRoot, input.snapshot);
          if (input.warm) await ctx.web?.warmInstall(input.install, call.signal);
          return {
            wp_version: backup.manifest.wp_version,
            ...(input.table_fingerprints && {
              table_fingerprints: await mariadb.fingerprints(databaseNames(id).db),
            }),
          };
        },
        true,
      ),

    /**
     * Issue 30: a backup taken on another server, from its archive (what exportArchive made there),
     * as `hp_<install>/<archive id>.imported`: the tar read as it arrives into a root-only temporary
     * directory (only its three artefacts, regular files), its SHA-256 and length checked against the
     * snapshot's archive, the manifest's checksums against the snapshot's, each artefact against the
     * manifest; then renamed into place (a crash leaves only the temporary directory). Kept (a move's
     * carried backup, decision #226): as `<archive id>.carried`, which no restore removes.
     */
    async importBackup(
      installId: string,
      snapshot: Snapshot,
      open: () => Promise<Readable>,
      signal: AbortSignal,
      options: { keep?: boolean } = {},
    ) {
      const archive = snapshot.archive;
      if (!archive || !/^[0-9a-f-]{36}$/.test(archive.id) || !snapshot.checksums)
        throw new Error('the snapshot names no archive (with checksums) to import');
      const location = `${installSlug(installId)}/${archive.id}${options.keep ? CARRIED : IMPORTED}`;
      const dir = backupDir(location);
      const imported = { ...snapshot, location };
      const present = await verifiedBackupAt(hostingRoot, imported).catch(() => null);
      if (present) return imported;
      const backups = pathsOf(hostingRoot, installId).backups;
      const tmp = path.join(backups, `.tmp-import-${archive.id}`);
      await files.remove(dir, signal);
      await files.remove(tmp, signal);
      for (const d of [path.dirname(backups), backups, tmp]) {
        await fs.mkdir(d, { recursive: true, mode: 0o700 });
        await fs.chmod(d, 0o700);
      }
      try {
        const got = await extractTar(await open(), tmp, [MANIFEST, DB_DUMP, FILES_ARCHIVE], signal);
        if (got.bytes !== archive.bytes || got.sha256 !== archive.sha256)
          throw new Error(
            `the archive of backup ${archive.id} arrived as ${got.bytes} bytes with SHA-256 ${got.sha256}, not ${archive.bytes} bytes with ${archive.sha256}`,
          );
        await fs.rename(tmp, dir);
        await verifiedBackupAt(hostingRoot, imported);
      } catch (err) {
        await files.remove(tmp).catch(() => undefined);
        await files.remove(dir).catch(() => undefined);
        throw err;
      }
      return imported;
    },

    /**
     * The backup's three artefacts (manifest, database dump, files archive) in one uncompressed tar,
     * streamed (issue 28 finding 9b, docs/decisions.md #142): the files archive is gzip already, so
     * nothing is compressed again; each artefact is hashed as it goes out and the stream fails (the
     * download ends short of its Content-Length) if it does not match the manifest's checksum.
     */
    async exportArchive({ install, backup }: ArchiveSource) {
      if (!backup.snapshot.location)
        throw new Error('the backup was not made by the local driver; it holds no files');
      const dir = backupDir(backup.snapshot.location);
      const manifest = await readManifest(dir);
      if (!manifest)
        throw new DriverError('backup', `backup ${backup.snapshot.location} is missing its manifest`, true);
      const expected: Record<string, string | null> = {
        [MANIFEST]: null,
        [DB_DUMP]: manifest.database.sha256,
        [FILES_ARCHIVE]: manifest.files.sha256,
      };
      const entries: TarEntry[] = [];
      try {
        for (const [name, sha256] of Object.entries(expected)) {
          const { stream, size } = await openBackupFile(path.join(dir, name));
          entries.push({
            name,
            size,
            mtime: backup.completed_at,
            content: stream,
            ...(sha256 && { sha256 }),
          });
        }
      } catch (err) {
        for (const entry of entries) (entry.content as Readable).destroy();
        throw err;
      }
      return {
        fileName: `${install.name}-${backup.id}.tar`,
        contentType: 'application/x-tar',
        body: tarStream(entries),
        size: tarSize(entries),
      };
    },
  };
}

async function readManifest(dir: string): Promise<Manifest | null> {
  try {
    return JSON.parse(await fs.readFile(path.join(dir, MANIFEST), 'utf8')) as Manifest;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The triggers' part of a table's fingerprint (database.ts fingerprints: rows, definition, triggers). */
const triggersPart = (print: string | undefined) => print?.split(':')[2] ?? '';

const snapshotOf = (manifest: Manifest, location: string): Snapshot => ({
  wp_version: manifest.wp_version,
  file_bytes: manifest.files.tree_bytes,
  db_tables: manifest.database.tables,
  location,
  checksums: { files: manifest.files.sha256, database: manifest.database.sha256 },
  ...(manifest.delta && { incremental: { base: manifest.delta.base } }),
});
