import { constants, createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DriverError, type DriverOperation } from '../driver.js';
import { bounded, TOOL_ENV } from './run.js';
import { spawnTool, type Tool } from './spawner.js';

/**
 * Issue 28 (findings 1-3, 9a): work inside a tenant's tree runs as the tree's owner. An install's
 * PHP runs as its system user, so everything under its document root (links, FIFOs, directories
 * swapped mid-walk) is the tenant's to shape: root never opens, copies, chowns, deletes or walks
 * inside such a tree. Archiving, extracting, copying, deleting, measuring and writing there are
 * tools spawned with the owner's uid and gid (supplementary groups dropped, umask of the worker,
 * killed by the job's signal); root only moves bytes through pipes between them and its own
 * root-only files, and touches only directory entries whose parent is root-owned (a rename, an
 * rmdir, an lstat: none follows a link). Where root must read a tenant file it opens it
 * O_NOFOLLOW|O_NONBLOCK, checks it is a regular file and reads a bounded size.
 *
 * Who a tree belongs to is the owner of its top directory (made by the driver in a root-owned
 * directory, so a tenant cannot change it): the install's system user with LOCAL_WEB=on, root with
 * LOCAL_WEB=off, where installs have no system user and no tenant code runs on this machine (the
 * same tools then run as root, with the same sanitising of what they bring in).
 */

export interface TreeOwner {
  uid: number;
  gid: number;
}

/** Root: the owner of LOCAL_WEB=off's trees (no tenant code runs there). */
export const ROOT: TreeOwner = { uid: 0, gid: 0 };

/** How long a tree tool may run when the caller has no job signal (cleanups of an earlier attempt). */
const CLEANUP_MS = 10 * 60_000;
export const cleanupSignal = () => AbortSignal.timeout(CLEANUP_MS);

/** The owner of the tree whose top directory is `dir` (null: absent). Refuses a top that is not a directory. */
export async function ownerOf(dir: string): Promise<TreeOwner | null> {
  try {
    const stat = await fs.lstat(dir);
    if (!stat.isDirectory()) throw new Error(`${dir} is not a directory`);
    return { uid: stat.uid, gid: stat.gid };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** A tool run as `owner` (no shell, cwd `/`, the tools' PATH only), SIGKILLed by `signal`. */
function spawnAs(
  owner: TreeOwner,
  command: string,
  args: string[],
  signal: AbortSignal,
  stdio: ['ignore' | 'pipe', 'ignore' | 'pipe'],
): Tool {
  return spawnTool(command, args, {
    ...(owner.uid !== 0 && { uid: owner.uid, gid: owner.gid }),
    cwd: '/',
    env: TOOL_ENV,
    signal,
    // The tenant can signal its own processes (a SIGSTOPped tar): only SIGKILL ends a stopped one.
    killSignal: 'SIGKILL',
    stdio: [...stdio, 'pipe'],
  });
}

/** Resolves when the tool exits 0 (its stdout is drained by the caller); rejects with its stderr otherwise. */
function exited(child: Tool, command: string, okCodes: number[] = [0]): Promise<number> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.on('error', (err) => {
      // Aborted: answered once the process has really stopped (nothing left writing in a tree).
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null)
        child.once('close', () => reject(err));
      else reject(err);
    });
    child.on('close', (code, sig) => {
      if (code !== null && okCodes.includes(code)) resolve(code);
      else reject(new Error(`${command} exited ${code ?? sig}: ${stderr.trim().slice(0, 500)}`));
    });
  });
}

/** Runs a tool as `owner`, answering its standard output (at most `max` bytes are kept). */
async function outputAs(
  owner: TreeOwner,
  command: string,
  args: string[],
  signal: AbortSignal,
  { max = 64 * 1024, okCodes = [0] }: { max?: number; okCodes?: number[] } = {},
): Promise<{ stdout: string; code: number }> {
  const child = spawnAs(owner, command, args, signal, ['ignore', 'pipe']);
  const chunks: Buffer[] = [];
  let size = 0;
  child.stdout?.on('data', (chunk: Buffer) => {
    if (size < max) chunks.push(chunk.subarray(0, max - size));
    size += chunk.length;
  });
  const code = await exited(child, command, okCodes);
  return { stdout: Buffer.concat(chunks).toString('utf8'), code };
}

/** A root-owned directory a tree tool of `owner` must reach: made when absent, `mode` (0711: pass, not list). */
export async function rootDir(dir: string, mode = 0o711) {
  await fs.mkdir(dir, { recursive: true, mode });
  const stat = await fs.lstat(dir);
  if (!stat.isDirectory() || stat.uid !== 0) throw new Error(`${dir} is not a root-owned directory`);
  await fs.chmod(dir, mode);
}

/**
 * The top of a new tree for `owner`: `dir` made (it must not exist; its parent is root-owned), given
 * to `owner`, mode 0700 while the driver fills it (only the owner and root reach it).
 */
export async function makeTreeDir(dir: string, owner: TreeOwner) {
  await rootDir(path.dirname(dir));
  await fs.mkdir(dir, { mode: 0o700 });
  await fs.lchown(dir, owner.uid, owner.gid);
  await fs.chmod(dir, 0o700);
}

/**
 * Makes a filled tree's top directory servable (before it is swapped in): `mode` without setuid,
 * setgid or write bits for others. Its parent is root-owned, so the path is the driver's.
 */
export async function settleTreeDir(dir: string, mode: number) {
  await fs.chmod(dir, mode & 0o1755);
}

/** Checks and cleans what a tool brought into a tree: setuid/setgid bits removed, device files refused. */
export async function sanitizeTree(
  owner: TreeOwner,
  dir: string,
  operation: DriverOperation,
  signal: AbortSignal,
) {
  const { stdout } = await outputAs(
    owner,
    'find',
    [
      dir,
      '(',
      '-type',
      'b',
      '-o',
      '-type',
      'c',
      ')',
      '-print',
      '-o',
      '-perm',
      '/6000',
      '-exec',
      'chmod',
      'ug-s',
      '--',
      '{}',
      '+',
    ],
    signal,
  );
  if (stdout.trim() !== '') throw new DriverError(operation, 'the tree holds device files; refused', true);
}

/**
 * `tar --create`'s exit 1 is "some files differ": a file changed or went away while it was read (a
 * live site writes its cache and uploads). The archive is whole and every other file exact, as any
 * backup of a running site is; only 2 (a fatal error) fails (decision #207).
 */
const TAR_CREATE_OK = [0, 1];

/** The compressor of backup archives: gzip's level 1 (still a `.tar.gz` any tool reads). */
const GZIP_FAST = 'gzip -1';

/**
 * A backup's tar.gz of `dir`'s contents: `tar --create` run as the tree's owner (links kept as
 * links, FIFOs as FIFOs, nothing followed; setuid/setgid bits dropped in the archive), its output
 * written by root into `archive` (a new file in a root-only directory, 0600).
 */
export async function archiveTree(owner: TreeOwner, dir: string, archive: string, signal: AbortSignal) {
  await tarInto(owner, ['--directory', dir, '.'], archive, signal);
}

/**
 * `tar --create` (gzip at its fastest level, docs/decisions.md #205: half the CPU of the default for
 * ~20% more bytes; owners as numbers, setuid/setgid bits dropped) run as `owner` with `args`, its
 * output written by root into `archive` (a new file, 0600); `names`, when given, fed on its stdin.
 */
async function tarInto(
  owner: TreeOwner,
  args: string[],
  archive: string,
  signal: AbortSignal,
  names?: string,
) {
  const handle = await fs.open(archive, 'wx', 0o600);
  try {
    const child = spawnAs(
      owner,
      'tar',
      [
        '--create',
        `--use-compress-program=${GZIP_FAST}`,
        '--numeric-owner',
        '--mode=ug-s',
        '--file',
        '-',
        ...args,
      ],
      signal,
      [names === undefined ? 'ignore' : 'pipe', 'pipe'],
    );
    const done = exited(child, 'tar', TAR_CREATE_OK);
    if (names !== undefined) (child.stdin as NodeJS.WritableStream).end(names);
    const write = (async () => {
      for await (const chunk of child.stdout as NodeJS.ReadableStream) await handle.write(chunk as Buffer);
    })();
    await Promise.all([write, done]);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The most a tree's index may take (find's output): a tree past it is refused, not indexed in part. */
const INDEX_MAX_BYTES = 256 * 1024 * 1024;

/**
 * Issue 30 (decision #235): every entry of the tree `dir` as `find -printf` reads it, run as the
 * tree's owner (nothing followed): type, size, mtime, ctime, mode, link target and path relative to
 * `dir`, each field ended by NUL (a name holds any byte but NUL). What the owner cannot read is left
 * out (find's exit 1), as tar leaves it out of a backup. Parsed by tree-index.ts.
 */
export async function indexTree(owner: TreeOwner, dir: string, signal: AbortSignal): Promise<string> {
  const child = spawnAs(
    owner,
    'find',
    [dir, '-mindepth', '1', '-printf', '%y\\0%s\\0%T@\\0%C@\\0%m\\0%l\\0%P\\0'],
    signal,
    ['ignore', 'pipe'],
  );
  const stdout = bounded(child, INDEX_MAX_BYTES);
  await exited(child, 'find (index)', [0, 1]).catch((err: unknown) => {
    if (stdout.over())
      throw new Error(
        `the tree ${dir} holds too many entries to index (over ${INDEX_MAX_BYTES} bytes of names)`,
      );
    throw err;
  });
  return stdout.text();
}

/**
 * Issue 30 (decision #235): a tar.gz of the entries `paths` (relative to `dir`, directories without
 * their contents) made by `tar --create` run as the tree's owner, the names read NUL-separated from
 * its stdin verbatim (a name starting with `-` is a name), written by root into `archive` (0600).
 */
export async function archivePaths(
  owner: TreeOwner,
  dir: string,
  paths: string[],
  archive: string,
  signal: AbortSignal,
) {
  await tarInto(
    owner,
    [
      // A name that went since it was listed is left out (the caller indexes again to see it).
      '--ignore-failed-read',
      // Positional: before the names they apply to.
      '--directory',
      dir,
      '--no-recursion',
      '--null',
      '--verbatim-files-from',
      '--files-from=-',
    ],
    archive,
    signal,
    paths.map((p) => `./${p}\0`).join(''),
  );
}

/**
 * Issue 30 (decision #235): removes the entries `paths` (relative to `dir`, trees with their
 * contents) as the tree's owner: `rm -rf` fed the names NUL-separated, in `dir`.
 */
export async function removePaths(owner: TreeOwner, dir: string, paths: string[], signal: AbortSignal) {
  if (paths.length === 0) return;
  const child = spawnAs(
    owner,
    '/bin/sh',
    ['-c', 'cd -P -- "$1" && exec xargs -0 -r rm -rf --', 'sh', dir],
    signal,
    ['pipe', 'ignore'],
  );
  const done = exited(child, 'rm (changes)');
  (child.stdin as NodeJS.WritableStream).end(paths.map((p) => `./${p}\0`).join(''));
  await done;
}

/** `tar --extract` run as `owner` into `dir` (made by {@link makeTreeDir}): modes kept, owners not. */
function extractor(owner: TreeOwner, dir: string, gzip: boolean, signal: AbortSignal, overwriteDirs = false) {
  return spawnAs(
    owner,
    'tar',
    [
      '--extract',
      ...(gzip ? ['--gzip'] : []),
      '--no-same-owner',
      '--same-permissions',
      overwriteDirs ? '--overwrite-dir' : '--no-overwrite-dir',
      '--file',
      '-',
      '--directory',
      dir,
    ],
    signal,
    ['pipe', 'ignore'],
  );
}

/**
 * A restore's tree: root reads its own backup archive and pipes it into `tar --extract` run as the
 * install's owner, in `dir` (only that owner and root reach it); then {@link sanitizeTree}. A
 * directory that exists keeps its mode, unless `overwriteDirs` (a move's changes: the archive lists
 * only the directories that are new or whose mode changed, never the tree's top; decision #235).
 */
export async function extractArchive(
  owner: TreeOwner,
  archive: string,
  dir: string,
  operation: DriverOperation,
  signal: AbortSignal,
  overwriteDirs = false,
) {
  const child = extractor(owner, dir, true, signal, overwriteDirs);
  const done = exited(child, 'tar');
  await Promise.all([
    pipeline(createReadStream(archive), child.stdin as NodeJS.WritableStream).catch(async (err) => {
      // tar stopped reading (it failed): its own error says why.
      await done;
      throw err;
    }),
    done,
  ]);
  await sanitizeTree(owner, dir, operation, signal);
}

/**
 * A copy's tree: `tar --create` as the source's owner piped into `tar --extract` as the
 * destination's owner (root moves the bytes); then {@link sanitizeTree}. Links are copied as links
 * and land in the destination owner's tree, where only that owner follows them.
 */
export async function copyTree(
  from: { owner: TreeOwner; dir: string },
  to: { owner: TreeOwner; dir: string },
  operation: DriverOperation,
  signal: AbortSignal,
) {
  const both = new AbortController();
  const onAbort = () => both.abort(signal.reason);
  if (signal.aborted) both.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const reader = spawnAs(
      from.owner,
      'tar',
      ['--create', '--numeric-owner', '--mode=ug-s', '--file', '-', '--directory', from.dir, '.'],
      both.signal,
      ['ignore', 'pipe'],
    );
    const writer = extractor(to.owner, to.dir, false, both.signal);
    const fail = (err: unknown) => {
      both.abort(err);
      throw err;
    };
    const results = await Promise.allSettled([
      exited(reader, 'tar --create', TAR_CREATE_OK).catch(fail),
      exited(writer, 'tar --extract').catch(fail),
      pipeline(reader.stdout as NodeJS.ReadableStream, writer.stdin as NodeJS.WritableStream).catch(fail),
    ]);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw signal.aborted ? signal.reason : (failed as PromiseRejectedResult).reason;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  await sanitizeTree(to.owner, to.dir, operation, signal);
}

/**
 * Removes `target` (a path whose parent is root-owned): a file or link is unlinked; a directory
 * owned by root is walked (no tenant can change its entries) and one owned by anyone else is
 * emptied by a `find -delete` run as its owner (a link swapped in mid-walk only reaches what that
 * owner could delete anyway); root then removes the empty directory (rmdir follows nothing).
 */
export async function removeTree(target: string, signal: AbortSignal = cleanupSignal()): Promise<void> {
  let stat: Awaited<ReturnType<typeof fs.lstat>>;
  try {
    stat = await fs.lstat(target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!stat.isDirectory()) {
    await fs.unlink(target).catch(ignoreMissing);
    return;
  }
  if (stat.uid === 0) {
    for (const name of await fs.readdir(target)) await removeTree(path.join(target, name), signal);
  } else {
    await emptyAs({ uid: stat.uid, gid: stat.gid }, target, signal);
  }
  await fs.rmdir(target).catch(ignoreMissing);
}

function ignoreMissing(err: NodeJS.ErrnoException) {
  if (err.code !== 'ENOENT') throw err;
}

/**
 * Empties `dir` as its owner. A directory the owner made unwritable (or unreadable) is opened up by
 * the owner first; a few passes, since the tenant's own processes may still be writing there.
 */
async function emptyAs(owner: TreeOwner, dir: string, signal: AbortSignal) {
  for (let attempt = 1; ; attempt++) {
    const { code } = await outputAs(owner, 'find', [dir, '-mindepth', '1', '-delete'], signal, {
      okCodes: [0, 1],
    });
    if (code === 0 && (await fs.readdir(dir)).length === 0) return;
    if (attempt >= 3)
      throw new Error(`could not empty ${dir} as its owner (uid ${owner.uid}): something in it stays`);
    await outputAs(
      owner,
      'find',
      [dir, '-type', 'd', '!', '-perm', '-u=rwx', '-exec', 'chmod', 'u+rwx', '--', '{}', ';'],
      signal,
      { okCodes: [0, 1] },
    );
  }
}

/**
 * Apparent bytes of a tree as `du -sb` counts them (lstat sizes, hard links once): root-owned
 * directories walked by root, a tree of anyone else measured by `du -sb` run as its owner.
 */
export async function treeBytes(target: string, signal: AbortSignal): Promise<number> {
  const seen = new Set<string>();
  async function walk(p: string): Promise<number> {
    const stat = await fs.lstat(p);
    if (!stat.isDirectory()) {
      if (stat.nlink > 1) {
        const id = `${stat.dev}:${stat.ino}`;
        if (seen.has(id)) return 0;
        seen.add(id);
      }
      return stat.size;
    }
    if (stat.uid !== 0) return duAs({ uid: stat.uid, gid: stat.gid }, p, signal);
    let total = stat.size;
    for (const name of await fs.readdir(p)) {
      total += await walk(path.join(p, name)).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return 0;
        throw err;
      });
    }
    return total;
  }
  try {
    return await walk(target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

/** `du -sb` as the tree's owner (what it cannot read itself is not counted: exit 1 still totals). */
async function duAs(owner: TreeOwner, dir: string, signal: AbortSignal): Promise<number> {
  const { stdout } = await outputAs(owner, 'du', ['-sb', '--', dir], signal, { okCodes: [0, 1] });
  const bytes = Number(/^(\d+)\t/m.exec(stdout)?.[1]);
  if (!Number.isSafeInteger(bytes)) throw new Error(`du -sb ${dir}: no total`);
  return bytes;
}

/**
 * A small regular file root reads where only the last component is the tenant's (its directory is
 * a tree top in a root-owned directory): opened O_NOFOLLOW|O_NONBLOCK (a link, a FIFO or a device
 * never blocks nor leads elsewhere), null unless fstat says a regular file; at most `max` bytes.
 */
export async function readRegular(file: string, max = 64 * 1024): Promise<Buffer | null> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENXIO') return null;
    throw err;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return null;
    const buffer = Buffer.alloc(Math.min(max, Math.max(0, stat.size)));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * A small file deeper in a tenant's tree (`rel` under the tree top `dir`): read by `dd` run as the
 * tree's owner (nofollow, nonblock: a FIFO reads as empty), at most `max` bytes; null when it cannot
 * be read. With root's trees (LOCAL_WEB=off) root reads it as {@link readRegular} does.
 */
export async function readTreeFile(
  dir: string,
  rel: string,
  signal: AbortSignal,
  max = 64 * 1024,
): Promise<string | null> {
  const owner = await ownerOf(dir);
  if (!owner) return null;
  const file = path.join(dir, rel);
  if (owner.uid === 0) return (await readRegular(file, max))?.toString('utf8') ?? null;
  try {
    const { stdout } = await outputAs(
      owner,
      'dd',
      [`if=${file}`, 'iflag=nofollow,nonblock', `bs=${max}`, 'count=1', 'status=none'],
      signal,
      { max },
    );
    return stdout;
  } catch (err) {
    if (signal.aborted) throw err;
    return null;
  }
}

/**
 * Writes `content` to `file` in a tree as the tree's owner (a temporary file beside it, `mode`, then
 * renamed over it): whatever the tenant put at that name (a link, a FIFO) is replaced, not followed
 * by root. The content travels on the tool's stdin; the path is an argument, never shell code.
 */
export async function writeTreeFile(
  owner: TreeOwner,
  file: string,
  content: string,
  mode: number,
  signal: AbortSignal,
) {
  const script =
    'umask 077 && t="$1.hostplane-tmp" && rm -f -- "$t" && cat > "$t" && chmod "$2" -- "$t" && mv -f -T -- "$t" "$1"';
  const child = spawnAs(owner, '/bin/sh', ['-c', script, 'sh', file, mode.toString(8)], signal, [
    'pipe',
    'ignore',
  ]);
  const done = exited(child, 'sh (write)');
  (child.stdin as NodeJS.WritableStream).end(content);
  await done;
}

/** Runs a tool as the tree's owner (the shell-free steps of core copying and the like). */
export async function runAs(owner: TreeOwner, command: string, args: string[], signal: AbortSignal) {
  await outputAs(owner, command, args, signal);
}
