import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { InstallPaths } from './names.js';
import { run } from './run.js';

/**
 * The local driver's file side: an install's directories and what is read from them (WordPress and
 * PHP versions), archives made and read by the system `tar` (spawned with an argument array, never a
 * shell), sizes and checksums, and the swap that replaces a directory so that a crash leaves either
 * the old or the new one. Where each thing lives is names.ts.
 */

const PLACEHOLDER = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Coming soon</title></head>
<body><h1>This site is being set up</h1><p>Hosted by Hostplane.</p></body>
</html>
`;

/** The install's directories and, when the document root is empty, a PHP-free placeholder page. */
export async function createInstallDirs(paths: InstallPaths) {
  for (const dir of [paths.public, paths.private, paths.cache]) await fs.mkdir(dir, { recursive: true });
  await fs.chmod(paths.private, 0o700);
  const entries = await fs.readdir(paths.public);
  if (entries.length === 0) await fs.writeFile(path.join(paths.public, 'index.html'), PLACEHOLDER);
}

/** WordPress's version from wp-includes/version.php, when there is one. */
export async function readWpVersion(documentRoot: string): Promise<string | null> {
  const text = await readSmall(path.join(documentRoot, 'wp-includes', 'version.php'));
  const match = text && /\$wp_version\s*=\s*['"]([0-9A-Za-z.+-]{1,32})['"]/.exec(text);
  return match?.[1] ?? null;
}

/** The PHP version an operator declared for the install (private/php-version), when there is one. */
export async function readPhpVersion(privateDir: string): Promise<string | null> {
  const text = await readSmall(path.join(privateDir, 'php-version'));
  const match = text && /^\s*(\d+\.\d+(?:\.\d+)?)\s*$/.exec(text);
  return match?.[1] ?? null;
}

async function readSmall(file: string): Promise<string | null> {
  try {
    const handle = await fs.open(file, 'r');
    try {
      const buffer = Buffer.alloc(64 * 1024);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return buffer.subarray(0, bytesRead).toString('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Apparent bytes of a tree as `du -sb` counts them: every file, directory and link once (lstat
 * sizes, hard links counted once).
 */
export async function treeBytes(dir: string): Promise<number> {
  const seen = new Set<string>();
  async function walk(p: string): Promise<number> {
    const stat = await fs.lstat(p);
    if (stat.nlink > 1 && !stat.isDirectory()) {
      const id = `${stat.dev}:${stat.ino}`;
      if (seen.has(id)) return 0;
      seen.add(id);
    }
    let total = stat.size;
    if (stat.isDirectory()) {
      for (const name of await fs.readdir(p)) total += await walk(path.join(p, name));
    }
    return total;
  }
  try {
    return await walk(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A tar.gz of `dir`'s contents (streamed by the system tar; owners not recorded). */
export function tarDirectory(dir: string, archive: string, signal: AbortSignal) {
  return run('tar', ['--create', '--gzip', '--numeric-owner', '--file', archive, '--directory', dir, '.'], {
    signal,
    env: { PATH: '/usr/bin:/bin' },
  });
}

/** Extracts an archive this driver made into `dir` (created; must not exist). */
export async function untar(archive: string, dir: string, signal: AbortSignal) {
  await fs.mkdir(dir, { recursive: true });
  await run('tar', ['--extract', '--gzip', '--no-same-owner', '--file', archive, '--directory', dir], {
    signal,
    env: { PATH: '/usr/bin:/bin' },
  });
}

/** Removes a path if it exists (files and whole trees). */
export const remove = (p: string) => fs.rm(p, { recursive: true, force: true });

export async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Replaces `live` with the ready `staged` tree: live -> `<live>.old`, staged -> live, then the old
 * one is removed. A crash between the two renames leaves no live tree but `.old`:
 * {@link recoverSwap} (run before any work on the install) puts it back.
 */
export async function swapIn(live: string, staged: string) {
  const old = `${live}.old`;
  await remove(old);
  if (await exists(live)) await fs.rename(live, old);
  await fs.rename(staged, live);
  await remove(old);
}

/** Undoes a swap a crash interrupted, and removes what an interrupted step left behind. */
export async function recoverSwap(live: string) {
  const old = `${live}.old`;
  if (!(await exists(live)) && (await exists(old))) await fs.rename(old, live);
  await remove(old);
}
