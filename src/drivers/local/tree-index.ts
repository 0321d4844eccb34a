/**
 * Issue 30 (decision #235): a move's incremental final sync compares a tree with what it was at the
 * copy. An index is every entry of an install's document root as `find -printf` read it as the
 * tree's owner (tenant.ts indexTree); the copy's backup keeps one taken before its archive, so any
 * change after it (or during the archive) differs from it: new and changed entries are sent again,
 * entries gone are removed on the target. A tenant can set a file's mtime back, never its ctime.
 */

/** One entry: `find`'s type letter (f, d, l, p, s...), size, mtime and ctime (seconds, fractions kept as printed), mode (octal), link target. */
export interface TreeEntry {
  type: string;
  size: number;
  mtime: string;
  ctime: string;
  mode: string;
  link: string;
}

/** Relative path -> entry. */
export type TreeIndex = Map<string, TreeEntry>;

/**
 * What the target must hold after the sync, as the source's tree was when the changes were taken:
 * `[path, type, size, mtime seconds, link]` for regular files (`f`), directories (`d`) and links
 * (`l`). Other entries (FIFOs, sockets) are not compared: tar keeps a FIFO, drops a socket.
 */
export type ExpectedEntry = [path: string, type: 'f' | 'd' | 'l', size: number, mtime: number, link: string];

const FIELDS = 7;

/** Parses {@link indexTree}'s output (seven NUL-ended fields an entry). */
export function parseIndex(output: string): TreeIndex {
  const fields = output.split('\0');
  const index: TreeIndex = new Map();
  // A complete output ends with NUL: the last element is empty.
  for (let i = 0; i + FIELDS <= fields.length - 1; i += FIELDS) {
    const [type = '', size = '0', mtime = '', ctime = '', mode = '', link = '', rel = ''] = fields.slice(
      i,
      i + FIELDS,
    );
    if (rel === '') continue;
    index.set(rel, { type, size: Number(size), mtime, ctime, mode, link });
  }
  return index;
}

/** An index as JSON keeps it (an array of rows, smaller than objects). */
export const indexRows = (index: TreeIndex) =>
  [...index].map(([rel, e]) => [rel, e.type, e.size, e.mtime, e.ctime, e.mode, e.link] as const);

export function indexFromRows(rows: unknown): TreeIndex {
  if (!Array.isArray(rows)) throw new Error('a tree index is an array of rows');
  const index: TreeIndex = new Map();
  for (const row of rows as [string, string, number, string, string, string, string][])
    index.set(row[0], {
      type: row[1],
      size: row[2],
      mtime: row[3],
      ctime: row[4],
      mode: row[5],
      link: row[6],
    });
  return index;
}

// A directory's size and times follow its entries (listed on their own): its mode is its own.
const same = (a: TreeEntry, b: TreeEntry) =>
  a.type === b.type &&
  (a.type === 'd'
    ? a.mode === b.mode
    : a.size === b.size &&
      a.mtime === b.mtime &&
      a.ctime === b.ctime &&
      a.mode === b.mode &&
      a.link === b.link);

/** Whether two indexes of a tree list the same entries, alike (directories by type and mode only). */
export function sameIndex(a: TreeIndex, b: TreeIndex): boolean {
  if (a.size !== b.size) return false;
  for (const [rel, entry] of a) {
    const other = b.get(rel);
    if (!other || !same(entry, other)) return false;
  }
  return true;
}

/** Whether `rel` lies inside one of `dirs` (a set of relative directory paths). */
function under(rel: string, dirs: Set<string>) {
  for (let at = rel.lastIndexOf('/'); at > 0; at = rel.lastIndexOf('/', at - 1))
    if (dirs.has(rel.slice(0, at))) return true;
  return false;
}

/**
 * What changed from `base` to `now`: `send`, the entries to archive (new ones, and files, links and
 * FIFOs whose size, times, mode or target differ; a directory when new or its mode changed: its
 * entries are listed on their own), and `remove`, what the target removes first (entries gone, only the topmost of a
 * gone tree, and entries whose type changed: a directory that became a file, a file that became a
 * directory or a link), both sorted.
 */
export function diffIndex(base: TreeIndex, now: TreeIndex): { send: string[]; remove: string[] } {
  const send: string[] = [];
  const remove: string[] = [];
  for (const [rel, entry] of now) {
    const before = base.get(rel);
    if (!before) send.push(rel);
    else if (before.type !== entry.type) {
      send.push(rel);
      remove.push(rel);
    } else if (!same(before, entry)) send.push(rel);
  }
  const gone = new Set<string>();
  for (const [rel, entry] of base) if (entry.type === 'd' && now.get(rel)?.type !== 'd') gone.add(rel);
  for (const rel of base.keys()) if (!now.has(rel) && !under(rel, gone)) remove.push(rel);
  return { send: send.sort(), remove: remove.sort() };
}

/** The entries the target must hold (see {@link ExpectedEntry}), sorted by path. */
export function expectedOf(index: TreeIndex): ExpectedEntry[] {
  const rows: ExpectedEntry[] = [];
  for (const [rel, e] of index)
    if (e.type === 'f' || e.type === 'd' || e.type === 'l')
      rows.push([rel, e.type, e.type === 'f' ? e.size : 0, Math.floor(Number(e.mtime)), e.link]);
  return rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/**
 * How the tree `actual` differs from `expected` (an empty list: it matches), at most `max` lines:
 * each expected file, directory and link present with its type; a file with its size and mtime (in
 * whole seconds: tar keeps no more), a link with its target; nothing else present (but `ignore`d
 * paths, the target's own, such as its wp-config.php).
 */
export function treeMismatch(
  expected: ExpectedEntry[],
  actual: TreeIndex,
  ignore: ReadonlySet<string>,
  max = 5,
): string[] {
  const out: string[] = [];
  const want = new Set<string>();
  for (const [rel, type, size, mtime, link] of expected) {
    want.add(rel);
    if (ignore.has(rel)) continue;
    const got = actual.get(rel);
    if (!got) out.push(`${JSON.stringify(rel)} is missing`);
    else if (got.type !== type) out.push(`${JSON.stringify(rel)} is a ${got.type}, not a ${type}`);
    else if (type === 'f' && got.size !== size)
      out.push(`${JSON.stringify(rel)} holds ${got.size} bytes, not ${size}`);
    else if (type === 'f' && Math.floor(Number(got.mtime)) !== mtime)
      out.push(`${JSON.stringify(rel)} was modified at ${Math.floor(Number(got.mtime))}, not ${mtime}`);
    else if (type === 'l' && got.link !== link)
      out.push(`${JSON.stringify(rel)} links to ${JSON.stringify(got.link)}, not ${JSON.stringify(link)}`);
    if (out.length >= max) return out;
  }
  for (const [rel, got] of actual) {
    if (want.has(rel) || ignore.has(rel) || !['f', 'd', 'l'].includes(got.type)) continue;
    out.push(`${JSON.stringify(rel)} is there and should not be`);
    if (out.length >= max) return out;
  }
  return out;
}
