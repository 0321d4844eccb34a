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
export async function bundle({
  entryPoints,
  outdir,
  plugins = [],
  sourcemap,
  entryNames,
  requireShim = false,
}) {
  // A bundle's map names the TypeScript files and lines (chained through the compiled files' inline
  // maps); their text is in the repository, not repeated in the map.
  await build({
    ...NODE_ESM,
    entryPoints,
    outdir,
    sourcemap,
    sourcesContent: false,
    entryNames,
    plugins,
    bundle: true,
    splitting: true,
    // CommonJS bundled in calls require() for node's built-ins: each output file gets one of its own.
    ...(requireShim && {
      banner: {
        js: "import { createRequire as __hpRequire } from 'node:module'; const require = __hpRequire(import.meta.url);",
      },
    }),
  });
}

/**
 * Packages that stay imports of node_modules in the bundles: they read files next to their own
 * (PGlite's WebAssembly and data, the Swagger UI's assets), start workers by file name (pino's
 * transports), are native or are the tools themselves. Every other package is bundled in: each
 * CommonJS module node resolves, stats and wraps at run time (fastify's tree, ajv, pg, mysql2,
 * @peculiar/x509...) cost a process start a few hundred CPU-milliseconds. Issue 29 defect 4: pg-boss
 * too (it reads no file of its own); outside, it loaded a second copy of pg from node_modules.
 */
const EXTERNAL =
  /^(@electric-sql\/pglite|pino|thread-stream|@fastify\/swagger-ui|@fastify\/static|esbuild|tsx|playwright-core|typescript|@biomejs)(\/|$)/;

/** The esbuild plugin keeping EXTERNAL packages (and node: built-ins) out of a bundle. */
export const externalPackages = {
  name: 'external-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('node:') || EXTERNAL.test(args.path) ? { external: true } : undefined,
    );
  },
};

/**
 * The esbuild plugin that keeps `import.meta.url` meaning a compiled file's own place inside a
 * bundle written to `outdir` (paths relative to it: migrations, templates, fixtures), for the files
 * under `under`.
 */
export function ownImportMetaUrl({ under, outdir }) {
  return {
    name: 'own-import-meta-url',
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, (args) => {
        if (!args.path.startsWith(under)) return undefined;
        const text = fs.readFileSync(args.path, 'utf8');
        if (!text.includes('import.meta.url')) return undefined;
        // Every entry and chunk is written at outdir's top (entryNames '[name]'), so the compiled
        // file's path from there, resolved against the running chunk's URL, is the file's own place.
        const relative = path.relative(outdir, args.path).split(path.sep).join('/');
        return {
          contents: text.replaceAll(
            'import.meta.url',
            `new URL(${JSON.stringify(relative)}, import.meta.url).href`,
          ),
          loader: 'js',
          resolveDir: path.dirname(args.path),
        };
      });
    },
  };
}
