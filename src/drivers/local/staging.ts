import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import { DriverError } from '../driver.js';
import type { LocalContext } from './context.js';
import type { Trigger } from './database.js';
import * as files from './files.js';
import { databaseNames, pathsOf, swapJournal } from './names.js';

/**
 * Restores and copies stage everything first (a directory under HOSTING_ROOT/staging, the install's
 * staging database) and change the live install only at the end, all or nothing (issue 28 finding 7,
 * decisions.md #136): {@link swapStaged} checks what is staged, writes a journal, swaps the tables
 * (one RENAME TABLE, the triggers defined again around it), then the document root (two renames),
 * then marks the journal committed and removes what was replaced. A failure at any step before the
 * commit puts back what was swapped and removes what was staged; a crash leaves the journal, and
 * {@link recover} (run before any work on an install) does the same undo, or finishes the clean-up
 * of a committed swap. A retry therefore never starts from a half-swap.
 */

type Staging = Pick<LocalContext, 'mariadb' | 'hostingRoot'>;

/** What a swap changes, written before it starts: everything an undo needs, whatever the crash. */
interface Journal {
  format: 1;
  key: string;
  /**
   * `swapping`: undo on recovery; `undone`: put back, only the staging to remove; `committed`: both
   * swaps done, only the replaced tree and tables to remove.
   */
  phase: 'swapping' | 'undone' | 'committed';
  /** The staging directory (removed at the end). */
  staging: string;
  /** The document root swap: the staged tree, the live one, and whether there was a live one. */
  files: { staged: string; live: string; hadLive: boolean } | null;
  /** The tables swap: names moved in and out, and the triggers taken off each side around the RENAME. */
  tables: { incoming: string[]; outgoing: string[]; staged: Trigger[]; live: Trigger[] } | null;
}

/** What a restore or copy staged, for {@link swapStaged}. */
export interface Staged {
  operation: 'restore' | 'copy';
  key: string;
  /** The staging directory (removed at the end, whatever happens). */
  staging: string;
  /** The staged document root to swap in, or null: the files stay. */
  tree: string | null;
  /**
   * The staged tables to swap in (from the staging database), or null: the tables stay. `only`: the
   * live tables replaced (null: all of them; else those named and those coming in).
   */
  tables: { only: string[] | null; triggers: Trigger[] } | null;
}

/**
 * Loads a dump into the install's (fresh) staging database. Its triggers are answered and dropped
 * there: nothing fires in staging (the copy's URL rewrite updates rows), and a table with a trigger
 * cannot move to another database ("Trigger in wrong schema"); the swap defines them again.
 */
export async function stageDatabase(
  { mariadb }: Staging,
  installId: string,
  dump: string,
  signal: AbortSignal,
  operation: 'restore' | 'copy' = 'restore',
): Promise<Trigger[]> {
  const n = databaseNames(installId);
  // A dump keeps a trigger's statement as its maker wrote it: one named with its database would be
  // defined in that (live) database by the load, not in staging. Refused before anything is loaded.
  const qualified = await qualifiedTriggers(dump);
  if (qualified.length > 0)
    throw new DriverError(
      operation,
      `the database dump defines trigger(s) with their database's name (${qualified.join(', ')}), which would load into the live database: define them without it (CREATE TRIGGER name ...) and take a new backup`,
      true,
    );
  await mariadb.dropDatabase(n.staging);
  await mariadb.createDatabase(n.staging);
  await mariadb.load(n.staging, dump, signal);
  const triggers = await mariadb.triggersOf(n.staging);
  for (const trigger of triggers) await mariadb.dropTrigger(n.staging, trigger.name);
  return triggers;
}

/** A trigger's first line in mariadb-dump's output, its name qualified by a database (`db`.`name`, db.name). */
const QUALIFIED_TRIGGER =
  /^\/\*!50003 CREATE\*\/ (?:\/\*!50017 DEFINER=.*?\*\/ )?\/\*!50003 TRIGGER\s+((?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)\s*\.\s*(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+))/;

/** The qualified trigger names a dump defines (read line by line: its trigger blocks sit between DELIMITER lines). */
async function qualifiedTriggers(dump: string): Promise<string[]> {
  const found: string[] = [];
  let inTriggers = false;
  for await (const line of readline.createInterface({ input: createReadStream(dump), crlfDelay: Infinity })) {
    if (line === 'DELIMITER ;;') inTriggers = true;
    else if (line === 'DELIMITER ;') inTriggers = false;
    else if (inTriggers) {
      const name = QUALIFIED_TRIGGER.exec(line)?.[1];
      if (name && found.length < 10) found.push(name);
    }
  }
  return found;
}

/** After a failed attempt before any swap: its staging directory and databases go (the live install was not touched). */
export async function discardStaging({ mariadb }: Staging, installId: string, staging: string) {
  const n = databaseNames(installId);
  await files.remove(staging).catch(() => undefined);
  await mariadb.dropDatabase(n.staging).catch(() => undefined);
  await mariadb.dropDatabase(n.trash).catch(() => undefined);
}

/** Runs `work` (staging a restore or a copy); when it fails, its staging goes (see {@link discardStaging}). */
export async function discardOnFailure<T>(
  ctx: Staging,
  installId: string,
  staging: string,
  work: () => Promise<T>,
): Promise<T> {
  try {
    return await work();
  } catch (err) {
    await discardStaging(ctx, installId, staging);
    throw err;
  }
}

/**
 * Swaps in what a restore or copy staged, all or nothing; answers the tables swapped in (sorted).
 * Everything is checked before anything changes (views refused, names quoted, the tree on the same
 * file system); `betweenSwaps` is the test-mode fault point after the tables, before the files.
 */
export async function swapStaged(
  ctx: Staging & Pick<LocalContext, 'betweenSwaps'>,
  installId: string,
  staged: Staged,
  signal: AbortSignal,
): Promise<string[]> {
  const journal = await discardOnFailure(ctx, installId, staged.staging, async () => {
    const prepared = await prepare(ctx, installId, staged);
    await writeJournal(ctx, installId, prepared);
    return prepared;
  });
  try {
    if (journal.tables) await swapTables(ctx, installId, journal.tables);
    await ctx.betweenSwaps(staged.operation, signal);
    if (journal.files) await swapFiles(journal.files);
    journal.phase = 'committed';
    await writeJournal(ctx, installId, journal);
  } catch (err) {
    // Undone now; if the undo itself fails, the journal stays and the next call's recover() retries it.
    await undo(ctx, installId, journal).catch((undoErr: unknown) => {
      if (err instanceof Error)
        err.message += `; putting the install back failed too, the next call retries it: ${(undoErr as Error).message}`;
    });
    throw err;
  }
  // Committed: the swap is done. A clean-up that fails now (the old tree's tenant processes still
  // writing in it) leaves the journal `committed` for the next call's recover() (decision 131).
  await finish(ctx, installId, journal).catch(() => undefined);
  return [...(journal.tables?.incoming ?? [])].sort();
}

/** Before any work on an install: a swap a crash interrupted is undone (or its clean-up finished). */
export async function recover(ctx: Staging, installId: string, signal?: AbortSignal) {
  const journal = await readJournal(ctx, installId);
  if (journal?.phase === 'committed') await finish(ctx, installId, journal);
  else if (journal) await undo(ctx, installId, journal);
  await files.recoverSwap(pathsOf(ctx.hostingRoot, installId).public, signal);
  await ctx.mariadb.dropUser(databaseNames(installId).rewriter);
}

/** Checks what is staged and reads what the swap will move, changing nothing. */
async function prepare(
  { mariadb, hostingRoot }: Staging,
  installId: string,
  staged: Staged,
): Promise<Journal> {
  const n = databaseNames(installId);
  const live = pathsOf(hostingRoot, installId).public;
  let tables: Journal['tables'] = null;
  if (staged.tables) {
    // Decisions.md #137: a view is not moved (RENAME TABLE cannot take one to another database, and
    // its definition names its database): refused before anything changes, with the reason.
    const views = await mariadb.viewsOf(n.staging);
    if (views.length > 0)
      throw new DriverError(
        staged.operation,
        `the database holds views (${views.map((v) => JSON.stringify(v)).join(', ')}), which a ${staged.operation} does not carry: drop them from the source and take a new backup or copy`,
        true,
      );
    const { only } = staged.tables;
    const incoming = Object.keys(await mariadb.tablesOf(n.staging));
    const present = Object.keys(await mariadb.tablesOf(n.db));
    const outgoing =
      only === null ? present : present.filter((t) => incoming.includes(t) || only.includes(t));
    const live = await mariadb.triggersOf(n.db);
    // A trigger name is one per database: one the live tables that stay already use cannot be defined.
    const kept = new Set(live.filter((tr) => !outgoing.includes(tr.table)).map((tr) => tr.name));
    const clash = staged.tables.triggers
      .filter((tr) => kept.has(tr.name))
      .map((tr) => JSON.stringify(tr.name));
    if (clash.length > 0)
      throw new DriverError(
        staged.operation,
        `the trigger name(s) ${clash.join(', ')} are used in the destination by tables this ${staged.operation} does not replace: rename or drop those triggers first`,
        true,
      );
    tables = {
      incoming,
      outgoing,
      staged: staged.tables.triggers,
      live: live.filter((tr) => outgoing.includes(tr.table)),
    };
  }
  let tree: Journal['files'] = null;
  if (staged.tree) {
    const [from, to] = await Promise.all([fs.stat(staged.tree), fs.stat(path.dirname(live))]);
    if (!from.isDirectory()) throw new Error(`the staged tree ${staged.tree} is not a directory`);
    if (from.dev !== to.dev)
      throw new DriverError(
        staged.operation,
        'HOSTING_ROOT/staging and the installs are on different file systems: the swap cannot be a rename',
        true,
      );
    tree = { staged: staged.tree, live, hadLive: await files.exists(live) };
  }
  return { format: 1, key: staged.key, phase: 'swapping', staging: staged.staging, files: tree, tables };
}

/**
 * The tables swap: the triggers of the live tables going out are dropped (a table with a trigger
 * cannot change database), then one RENAME TABLE moves the live tables out to the trash database
 * and the staged ones in (atomic: the live database holds all old tables or all new ones), then the
 * staged triggers are defined on the live tables, as the install's own user.
 */
async function swapTables({ mariadb }: Staging, installId: string, t: NonNullable<Journal['tables']>) {
  const n = databaseNames(installId);
  await mariadb.dropDatabase(n.trash);
  await mariadb.createDatabase(n.trash);
  for (const trigger of t.live) await mariadb.dropTrigger(n.db, trigger.name);
  await mariadb.renameTables([
    ...t.outgoing.map((x): [string, string, string, string] => [n.db, x, n.trash, x]),
    ...t.incoming.map((x): [string, string, string, string] => [n.staging, x, n.db, x]),
  ]);
  for (const trigger of t.staged) await mariadb.createTrigger(n.db, trigger, `${n.user}@%`);
}

/** The document root swap: live -> `<live>.old`, staged -> live (the old tree removed at the commit). */
async function swapFiles({ staged, live, hadLive }: NonNullable<Journal['files']>) {
  const old = `${live}.old`;
  await files.remove(old);
  if (hadLive) await fs.rename(live, old);
  await fs.rename(staged, live);
}

/**
 * Puts back whatever of a swap happened (files, then tables), marks the journal `undone`, then
 * removes what was staged (the mark first: once the staging database is gone, where the tables are
 * can no longer be told from it). Each step can run again after a crash in the middle of it.
 */
async function undo(ctx: Staging, installId: string, journal: Journal) {
  if (journal.phase === 'swapping') {
    await putBack(ctx, installId, journal);
    journal.phase = 'undone';
    await writeJournal(ctx, installId, journal);
  }
  await discardStaging(ctx, installId, journal.staging);
  await ctx.mariadb.dropUser(databaseNames(installId).rewriter);
  await fs.rm(swapJournal(ctx.hostingRoot, installId), { force: true });
}

async function putBack({ mariadb }: Staging, installId: string, journal: Journal) {
  const n = databaseNames(installId);
  if (journal.files) {
    const { staged, live, hadLive } = journal.files;
    const old = `${live}.old`;
    // The staged tree is gone only if it was renamed to live: move it back.
    if (
      !(await files.exists(staged)) &&
      (await files.exists(live)) &&
      (!hadLive || (await files.exists(old)))
    )
      await fs.rename(live, staged);
    if (!(await files.exists(live)) && (await files.exists(old))) await fs.rename(old, live);
  }
  if (journal.tables) {
    const { incoming, outgoing, staged, live } = journal.tables;
    // RENAME TABLE is atomic: one table tells where they all are.
    const renamed =
      incoming.length > 0
        ? !(await mariadb.tableExists(n.staging, incoming[0] as string))
        : outgoing.length > 0 && (await mariadb.tableExists(n.trash, outgoing[0] as string));
    if (renamed) {
      for (const trigger of staged) await mariadb.dropTrigger(n.db, trigger.name);
      await mariadb.renameTables([
        ...incoming.map((x): [string, string, string, string] => [n.db, x, n.staging, x]),
        ...outgoing.map((x): [string, string, string, string] => [n.trash, x, n.db, x]),
      ]);
    }
    const present = new Set((await mariadb.triggersOf(n.db)).map((tr) => tr.name));
    for (const trigger of live) if (!present.has(trigger.name)) await mariadb.createTrigger(n.db, trigger);
  }
}

/** After the commit: the replaced tree and tables go, then the staging leftovers, then the journal. */
async function finish(ctx: Staging, installId: string, journal: Journal) {
  if (journal.files) await files.remove(`${journal.files.live}.old`);
  await discardStaging(ctx, installId, journal.staging);
  await fs.rm(swapJournal(ctx.hostingRoot, installId), { force: true });
}

/** Written whole (temporary file, fsync, rename, directory fsync), root's only: it holds trigger bodies. */
async function writeJournal({ hostingRoot }: Staging, installId: string, journal: Journal) {
  const file = swapJournal(hostingRoot, installId);
  const temp = `${file}.tmp`;
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const handle = await fs.open(temp, 'w', 0o600);
  try {
    await handle.writeFile(JSON.stringify(journal));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(temp, file);
  const dir = await fs.open(path.dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

async function readJournal({ hostingRoot }: Staging, installId: string): Promise<Journal | null> {
  const file = swapJournal(hostingRoot, installId);
  await fs.rm(`${file}.tmp`, { force: true });
  try {
    const journal = JSON.parse(await fs.readFile(file, 'utf8')) as Journal;
    if (journal.format !== 1) throw new Error(`unknown swap journal format in ${file}`);
    return journal;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
