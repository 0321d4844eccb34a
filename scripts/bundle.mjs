// Issue 20 (start-up): bundles the compiled CLI (dist/cli.js and every module of ours it imports, with
// TypeBox's ~680 small modules and drizzle-orm's ~100) into dist/bundle/, so a start loads a few files instead of ~900.
// Every other package stays an import of node_modules (native parts, dynamic loads, licences); a
// dynamic import stays lazy (its own chunk). `import.meta.url` keeps meaning the compiled file's own
// place, so paths relative to it (migrations, the PGlite template, the console build) do not move.
// Run by `npm run build` after compile-src.mjs; bin/hostplane.js starts the bundle when it is there.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle } from './compile-files.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'bundle');
/** Packages bundled in; every other bare import stays external. */
const BUNDLED = /^(typebox|drizzle-orm)(\/|$)/;

const keepExternal = {
  name: 'external-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (BUNDLED.test(args.path) ? undefined : { external: true }));
  },
};

const ownImportMetaUrl = {
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, (args) => {
      const text = fs.readFileSync(args.path, 'utf8');
      if (!args.path.startsWith(path.join(root, 'dist')) || !text.includes('import.meta.url'))
        return undefined;
      const relative = path.relative(outdir, args.path).split(path.sep).join('/');
      return {
        contents: text.replaceAll(
          'import.meta.url',
          `new URL(${JSON.stringify(relative)}, import.meta.url).href`,
        ),
        loader: 'js',
      };
    });
  },
};

fs.rmSync(outdir, { recursive: true, force: true });
await bundle({
  entryPoints: [path.join(root, 'dist', 'cli.js')],
  outdir,
  plugins: [keepExternal, ownImportMetaUrl],
});
