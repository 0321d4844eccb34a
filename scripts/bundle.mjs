// Issue 20 (start-up): bundles the compiled CLI (dist/cli.js and every module of ours it imports) into
// dist/bundle/, so a start loads a few files instead of ~900. Issue 29 defect 4: the CommonJS
// packages (fastify's tree, ajv, pg, mysql2, @peculiar/x509...) are bundled in too: node resolved,
// read, wrapped and compiled each of their ~600 modules at every start. What reads files next to its
// own, starts workers by file name or is native stays an import of node_modules (compile-files.mjs,
// EXTERNAL); a dynamic import stays lazy (its own chunk). `import.meta.url` keeps meaning the compiled
// file's own place, so paths relative to it (migrations, the PGlite template, the console build) do not move.
// Run by `npm run build` after compile-src.mjs; bin/hostplane.js starts the bundle when it is there.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle, externalPackages, ownImportMetaUrl } from './compile-files.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'bundle');

fs.rmSync(outdir, { recursive: true, force: true });
await bundle({
  entryPoints: [path.join(root, 'dist', 'cli.js')],
  outdir,
  entryNames: '[name]',
  requireShim: true,
  plugins: [externalPackages, ownImportMetaUrl({ under: path.join(root, 'dist'), outdir })],
});
