import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Issue 14: a fresh embedded data dir is a copy of a migrated one that `npm run build` made
 * (`hostplane build-template`), instead of an initdb plus every migration at the first start (~3.5 s).
 * It lives in dist/ (built, never committed), resolved the same from src/ and dist/.
 */
export const PGLITE_TEMPLATE_DIR = fileURLToPath(new URL('../../dist/pglite-template', import.meta.url));

/** Bumped when the layout below changes: an older template is then ignored (initdb). */
const FORMAT = 1;
const MANIFEST = 'manifest.json';
const DATA = 'data';

interface Manifest {
  format: number;
  /** The PGlite release that wrote the data dir: another one may embed another PostgreSQL. */
  pglite: string;
  /** Every folder of the data dir (PostgreSQL needs its empty ones too), relative, `/`-separated. */
  dirs: string[];
  /** Every file of the data dir and the SHA-256 of its bytes. */
  files: Record<string, string>;
}

/** The version of the installed @electric-sql/pglite (its package.json is not exported). */
export function pgliteVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite')));
  while (!fs.existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

function walk(root: string, rel = '', out: { dirs: string[]; files: string[] } = { dirs: [], files: [] }) {
  for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const child = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      out.dirs.push(child);
      walk(root, child, out);
    } else out.files.push(child);
  }
  return out;
}

const CHUNK = Buffer.allocUnsafe(1 << 20);

/**
 * The SHA-256 of a file, read in 1 MiB chunks through one buffer (the data dir is ~40 MB: reading
 * whole files would leave that much in a fresh process's resident memory); `copyTo` gets each chunk.
 */
function hashFile(file: string, copyTo?: string): string {
  const hash = createHash('sha256');
  const input = fs.openSync(file, 'r');
  const output = copyTo === undefined ? null : fs.openSync(copyTo, 'wx');
  try {
    for (let n = fs.readSync(input, CHUNK); n > 0; n = fs.readSync(input, CHUNK)) {
      const chunk = CHUNK.subarray(0, n);
      hash.update(chunk);
      if (output !== null) fs.writeSync(output, chunk);
    }
  } finally {
    fs.closeSync(input);
    if (output !== null) fs.closeSync(output);
  }
  return hash.digest('hex');
}

/**
 * Turns `dataDir` (a closed, migrated PGlite data dir) into the template at `templateDir`: the data
 * dir moves to `templateDir/data` beside a manifest of its files and their hashes. The template is
 * made in a temporary folder and renamed into place, so a failed build leaves none (or the old one).
 */
export function writeTemplate(dataDir: string, templateDir: string): void {
  const tmp = `${templateDir}.build-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  fs.renameSync(dataDir, path.join(tmp, DATA));
  const { dirs, files } = walk(path.join(tmp, DATA));
  const manifest: Manifest = {
    format: FORMAT,
    pglite: pgliteVersion(),
    dirs,
    files: Object.fromEntries(files.map((f) => [f, hashFile(path.join(tmp, DATA, f))])),
  };
  fs.writeFileSync(path.join(tmp, MANIFEST), JSON.stringify(manifest));
  fs.rmSync(templateDir, { recursive: true, force: true });
  fs.renameSync(tmp, templateDir);
}

function readManifest(templateDir: string): Manifest | string {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(templateDir, MANIFEST), 'utf8')) as Manifest;
  } catch (err) {
    return `no readable manifest (${(err as Error).message})`;
  }
  if (manifest.format !== FORMAT) return `format ${manifest.format}, expected ${FORMAT}`;
  const version = pgliteVersion();
  if (manifest.pglite !== version) return `written by PGlite ${manifest.pglite}, this is ${version}`;
  if (!Array.isArray(manifest.dirs) || typeof manifest.files !== 'object' || !manifest.files)
    return 'malformed manifest';
  return manifest;
}

/**
 * Copies the template's data dir to `target` (which must not exist), checking every file against
 * the manifest on the way. Returns null when `target` now holds the template's data dir, or why the
 * template was not used (missing, from another PGlite, a file changed or missing): `target` is then
 * removed and the caller runs initdb instead.
 */
export function copyTemplate(templateDir: string, target: string): string | null {
  const manifest = readManifest(templateDir);
  if (typeof manifest === 'string') return manifest;
  const source = path.join(templateDir, DATA);
  try {
    const found = walk(source);
    const expected = Object.keys(manifest.files);
    if (found.files.length !== expected.length || found.dirs.length !== manifest.dirs.length)
      return 'the data dir does not match its manifest';
    fs.mkdirSync(target);
    for (const dir of manifest.dirs) fs.mkdirSync(path.join(target, dir));
    for (const file of expected) {
      if (hashFile(path.join(source, file), path.join(target, file)) !== manifest.files[file])
        throw new Error(`${file} differs from its manifest hash`);
    }
    return null;
  } catch (err) {
    fs.rmSync(target, { recursive: true, force: true });
    return (err as Error).message;
  }
}
