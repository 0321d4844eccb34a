import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * The local driver's file side: where an install lives under HOSTING_ROOT, archives made and read by
 * the system `tar` (spawned with an argument array, never a shell), sizes and checksums, and the
 * staged swap that replaces a directory so that a crash leaves either the old or the new one.
 */

/** A directory name derived from an install id: only `hp_` and hex, so safe in paths and SQL. */
export function installSlug(installId: string): string {
  const hex = installId.toLowerCase().replace(/-/g, '');
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error(`not an install id: ${JSON.stringify(installId)}`);
  return `hp_${hex}`;
}

/** A directory name derived from an idempotency key (`<uuid>` or `<uuid>:<step>`), validated. */
export function keySlug(key: string): string {
  if (!/^[0-9a-f-]{36}(:[a-z]{1,32})?$/.test(key))
    throw new Error(`unexpected driver key ${JSON.stringify(key)}`);
  return key.replace(':', '.');
}

export interface InstallPaths {
  /** HOSTING_ROOT/installs/hp_<hex> */
  root: string;
  /** The document root (what a web server would serve): backed up, restored and copied. */
  public: string;
  /** Outside the document root: logs, configuration the site must not serve. */
  private: string;
  /** Purged by purge_cache. */
  cache: string;
  /** Backups of this install: HOSTING_ROOT/backups/hp_<hex>/<key>. */
  backups: string;
}

export function pathsOf(hostingRoot: string, installId: string): InstallPaths {
  const slug = installSlug(installId);
  const root = path.join(hostingRoot, 'installs', slug);
  return {
    root,
    public: path.join(root, 'public'),
    private: path.join(root, 'private'),
    cache: path.join(root, 'cache'),
    backups: path.join(hostingRoot, 'backups', slug),
  };
}

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

/** Runs a tool with an argument array (no shell); rejects with its stderr when it fails. */
export function run(
  command: string,
  args: string[],
  options: { signal: AbortSignal; env?: NodeJS.ProcessEnv; stdin?: string; stdout?: string },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      signal: options.signal,
      env: options.env ?? {},
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    const done = Promise.all([
      options.stdout ? pipeTo(child.stdout, options.stdout) : drain(child.stdout),
      options.stdin ? pipeFrom(options.stdin, child.stdin) : Promise.resolve(child.stdin.end()),
    ]);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      done.then(() => {
        if (code === 0) resolve();
        else reject(new Error(`${command} exited ${code ?? signal}: ${stderr.trim().slice(0, 500)}`));
      }, reject);
    });
  });
}

async function pipeTo(readable: NodeJS.ReadableStream, file: string) {
  const handle = await fs.open(file, 'w', 0o600);
  try {
    for await (const chunk of readable) await handle.write(chunk as Buffer);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function drain(readable: NodeJS.ReadableStream) {
  for await (const _ of readable);
}

async function pipeFrom(file: string, writable: NodeJS.WritableStream) {
  const { pipeline } = await import('node:stream/promises');
  await pipeline(createReadStream(file), writable);
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
