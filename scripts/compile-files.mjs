// The TypeScript of a tree compiled file by file by esbuild: types stripped, nothing bundled, each
// `.ts` to a `.js` of the same relative path; and the bundles made from compiled files. Used by `npm run build` (src/ to dist/: compile-src.mjs)
// and by the suite (src/ and test/ to .tmp/test-dist/: compile-tests.mjs). Type checking is
// `npm run typecheck`'s, which `npm test` runs (docs/decisions.md #121, #125).
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

/** Every `.ts` file under `dir` (not `.d.ts`), for which `keep(file)` holds. */
export function tsFiles(dir, keep = () => true) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...tsFiles(full, keep));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') && keep(full)) found.push(full);
  }
  return found;
}

/** What every esbuild run of the repository writes: ES modules for this Node.js. */
const NODE_ESM = { format: 'esm', platform: 'node', target: 'node20', logLevel: 'warning' };

/** Compiles `files` into `outdir`, keeping their paths relative to `outbase`. */
export async function compileFiles(files, { outdir, outbase, sourcemap }) {
  await build({ ...NODE_ESM, entryPoints: files, outdir, outbase, sourcemap });
}

/** Bundles `entryPoints` into `outdir`, what they share split into chunks (scripts/bundle.mjs, TypeBox for the tests). */
export async function bundle({ entryPoints, outdir, plugins = [] }) {
  await build({ ...NODE_ESM, entryPoints, outdir, plugins, bundle: true, splitting: true });
}
