import fs from 'node:fs';
import path from 'node:path';

/**
 * The tenant file model's modes (issue 28 finding 4, docs/security.md): which root-owned directory
 * under HOSTING_ROOT has which mode, and whether the directories above HOSTING_ROOT let the install
 * users and nginx pass (issue 29 defect 2). Only root-owned paths are touched here: nothing inside an
 * install's own tree (that runs as the install's user, wordpress.ts `restrictTree`).
 */

/** What `stat` answers for the checks (null: no such path). */
export type StatOf = (p: string) => { mode: number; uid: number } | null;

export const statOf: StatOf = (p) => {
  try {
    const s = fs.statSync(p);
    return { mode: s.mode & 0o7777, uid: s.uid };
  } catch {
    return null;
  }
};

const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/**
 * Every existing directory above `hostingRoot` (from `/` down to its parent) that others cannot pass
 * (no `o+x`): the install users (each in a group of its own) and nginx's workers could not reach
 * their files under it.
 */
export function closedParents(hostingRoot: string, stat: StatOf = statOf): { dir: string; mode: number }[] {
  const chain: string[] = [];
  for (let p = path.dirname(path.resolve(hostingRoot)); ; p = path.dirname(p)) {
    chain.unshift(p);
    if (path.dirname(p) === p) break;
  }
  const closed: { dir: string; mode: number }[] = [];
  for (const dir of chain) {
    const s = stat(dir);
    if (s && (s.mode & 0o001) === 0) closed.push({ dir, mode: s.mode });
  }
  return closed;
}

/** The operator's message for {@link closedParents}: each directory and the fix. */
export function closedMessage(hostingRoot: string, closed: { dir: string; mode: number }[]): string {
  const dirs = closed.map((c) => `${c.dir} (${octal(c.mode)})`).join(', ');
  const fix = closed.map((c) => `chmod o+x ${c.dir}`).join(' && ');
  return (
    `the install users and nginx (www-data) cannot pass ${dirs} above HOSTING_ROOT ${hostingRoot}: ` +
    `run ${fix} (search only, nothing becomes listable), or set HOSTING_ROOT outside it`
  );
}

/**
 * The root-owned directories of HOSTING_ROOT and their modes: passable-not-listable where the install
 * users or nginx's workers must pass (0711), root-only where they must not (0700). `staging` is 0711:
 * each restore's or copy's staging directory in it is root-only or the install's own.
 */
export function layout(hostingRoot: string, web: boolean): [string, number][] {
  const w = path.join(hostingRoot, 'web');
  return [
    [hostingRoot, 0o711],
    [path.join(hostingRoot, 'installs'), 0o711],
    [path.join(hostingRoot, 'backups'), 0o700],
    [path.join(hostingRoot, 'staging'), 0o711],
    ...(web
      ? ([
          [w, 0o711],
          [path.join(w, 'sites'), 0o700],
          [path.join(w, 'pools'), 0o700],
          // Access logs hold visitors' addresses; nginx's and PHP-FPM's masters (root) open them.
          [path.join(w, 'logs'), 0o700],
          // nginx's workers connect to the pools' sockets (0660 www-data) and use its temp and cache
          // paths, which its master makes and gives to www-data.
          [path.join(w, 'run'), 0o711],
          [path.join(w, 'tmp'), 0o711],
          [path.join(w, 'cache'), 0o711],
        ] as [string, number][])
      : []),
  ];
}

/**
 * Makes each directory of {@link layout} (root's) and sets its mode: at start and at provisioning.
 * Directories above HOSTING_ROOT that do not exist yet (`/var/lib/hostplane`) are made passable
 * (0711): made by a recursive mkdir under the worker's umask they would be 0700 and close it.
 */
export async function secureLayout(hostingRoot: string, web: boolean) {
  const missing: string[] = [];
  for (let p = path.dirname(path.resolve(hostingRoot)); !fs.existsSync(p); p = path.dirname(p))
    missing.unshift(p);
  for (const dir of missing) {
    await fs.promises.mkdir(dir, { mode: 0o711 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await fs.promises.chmod(dir, 0o711);
  }
  for (const [dir, mode] of layout(hostingRoot, web)) {
    await fs.promises.mkdir(dir, { recursive: true, mode });
    await fs.promises.chmod(dir, mode);
  }
}

/**
 * The modes `hostplane doctor` checks (issue 28): each directory of the layout no more open than it
 * should be, and each install's document root not readable by others. Answers the problems found.
 */
export function modeProblems(
  hostingRoot: string,
  web: boolean,
  stat: StatOf,
  list: (dir: string) => string[],
) {
  const problems: string[] = [];
  for (const [dir, mode] of layout(hostingRoot, web)) {
    const s = stat(dir);
    if (s && (s.mode & 0o777 & ~mode) !== 0)
      problems.push(`${dir} is ${octal(s.mode)} (want ${octal(mode)})`);
  }
  const installs = path.join(hostingRoot, 'installs');
  for (const name of list(installs)) {
    if (!/^hp_[0-9a-f]{32}$/.test(name)) continue;
    const s = stat(path.join(installs, name, 'public'));
    if (s && (s.mode & 0o007) !== 0)
      problems.push(
        `${path.join(installs, name, 'public')} is ${octal(s.mode)} (want 0750: no access for others)`,
      );
  }
  return problems;
}

/**
 * Whether the filesystem holding `dir` is mounted `nosuid` (from /proc/self/mountinfo's text): the
 * mount whose point is the longest prefix of `dir`. Null when the text names none.
 */
export function nosuidOf(mountInfo: string, dir: string): { mountPoint: string; nosuid: boolean } | null {
  let best: { mountPoint: string; nosuid: boolean } | null = null;
  const target = path.resolve(dir);
  for (const line of mountInfo.split('\n')) {
    const fields = line.split(' ');
    const mountPoint = fields[4]?.replace(/\\040/g, ' ');
    const options = fields[5];
    if (!mountPoint || !options) continue;
    const inside = mountPoint === '/' || target === mountPoint || target.startsWith(`${mountPoint}/`);
    if (inside && (!best || mountPoint.length >= best.mountPoint.length))
      best = { mountPoint, nosuid: options.split(',').includes('nosuid') };
  }
  return best;
}
