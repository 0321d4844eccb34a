import type { LocalContext } from './context.js';
import * as files from './files.js';
import { databaseNames, pathsOf } from './names.js';

/**
 * Restores and copies stage everything first (a directory under HOSTING_ROOT/staging, the install's
 * staging database) and change the live install only at the end, by renames: a failure before the
 * swap leaves the install as it was, and a crash in the middle of the directory swap is undone before
 * the next call ({@link recover}). The database swap is one RENAME TABLE (atomic in MariaDB).
 */

type Staging = Pick<LocalContext, 'mariadb' | 'hostingRoot'>;

/** Before any work on an install: undo a half-done swap of its document root. */
export const recover = ({ hostingRoot }: Staging, installId: string, signal?: AbortSignal) =>
  files.recoverSwap(pathsOf(hostingRoot, installId).public, signal);

/** Loads a dump into the install's (fresh) staging database. */
export async function stageDatabase(
  { mariadb }: Staging,
  installId: string,
  dump: string,
  signal: AbortSignal,
) {
  const n = databaseNames(installId);
  await mariadb.dropDatabase(n.staging);
  await mariadb.createDatabase(n.staging);
  await mariadb.load(n.staging, dump, signal);
}

/** Replaces `only` (null: all) tables of the install's database with those loaded into its staging one. */
export async function swapTables({ mariadb }: Staging, installId: string, only: string[] | null) {
  const n = databaseNames(installId);
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

/** After a failed attempt: its staging directory and database go (the live install was not touched). */
export async function discardStaging({ mariadb }: Staging, installId: string, staging: string) {
  await files.remove(staging).catch(() => undefined);
  await mariadb.dropDatabase(databaseNames(installId).staging).catch(() => undefined);
}
