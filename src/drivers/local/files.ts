import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { InstallPaths } from './names.js';
import * as tenant from './tenant.js';

/**
 * The local driver's file side: an install's directories and what is read from them (WordPress and
 * PHP versions), archives made by the system `tar` (spawned with an argument array, never a shell, as
 * the tree's owner: tenant.ts), sizes and checksums, and the swap that replaces a directory so that a crash leaves either
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
  // Issue 28: `wx` (O_CREAT|O_EXCL) never writes through a link put there meanwhile.
  if (entries.length === 0)
    await fs.writeFile(path.join(paths.public, 'index.html'), PLACEHOLDER, { flag: 'wx' }).catch((err) => {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    });
}

/**
 * WordPress's version from wp-includes/version.php, when there is one: read as the tree's owner
 * (issue 28 finding 9a: a FIFO or a link there never blocks nor misleads root; tenant.ts).
 */
export async function readWpVersion(documentRoot: string, signal: AbortSignal): Promise<string | null> {
  const text = await tenant.readTreeFile(documentRoot, path.join('wp-includes', 'version.php'), signal);
  const match = text && /\$wp_version\s*=\s*['"]([0-9A-Za-z.+-]{1,32})['"]/.exec(text);
  return match?.[1] ?? null;
}

/** The PHP version an operator declared for the install (private/php-version), when there is one. */
export async function readPhpVersion(privateDir: string): Promise<string | null> {
  const text = (await tenant.readRegular(path.join(privateDir, 'php-version')))?.toString('utf8');
  const match = text && /^\s*(\d+\.\d+(?:\.\d+)?)\s*$/.exec(text);
  return match?.[1] ?? null;
}

/**
 * Apparent bytes of a tree as `du -sb` counts them: every file, directory and link once (lstat
 * sizes, hard links counted once); a tenant's tree is measured as its owner (tenant.ts).
 */
export const treeBytes = (dir: string, signal: AbortSignal) => tenant.treeBytes(dir, signal);

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * A tar.gz of `dir`'s contents (owners not recorded, setuid/setgid bits dropped), made by `tar`
 * run as the tree's owner and written by root into `archive` (issue 28: tenant.ts).
 */
export async function tarDirectory(dir: string, archive: string, signal: AbortSignal) {
  await tenant.archiveTree((await tenant.ownerOf(dir)) ?? tenant.ROOT, dir, archive, signal);
}

/**
 * Removes a path if it exists (files and whole trees): a tenant's tree is emptied as its owner, root
 * only removes what is root's (issue 28 finding 3: tenant.ts `removeTree`).
 */
export const remove = (p: string, signal?: AbortSignal) => tenant.removeTree(p, signal);

export async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** Undoes a swap a crash interrupted, and removes what an interrupted step left behind. */
export async function recoverSwap(live: string, signal?: AbortSignal) {
  const old = `${live}.old`;
  if (!(await exists(live)) && (await exists(old))) await fs.rename(old, live);
  await remove(old, signal);
}
