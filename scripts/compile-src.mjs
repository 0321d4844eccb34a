// `npm run build`'s compile step: src/ (without its unit tests) to dist/, file by file (esbuild), with
// source maps beside the files; scripts/bundle.mjs then bundles dist/cli.js. It replaced `tsc -p
// tsconfig.build.json`, which type-checked src/ a second time at every `npm ci` (~20 CPU-s, the
// longest step of the install); the type check is `npm run typecheck`'s (docs/decisions.md #125).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileFiles, tsFiles } from './compile-files.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
await compileFiles(
  tsFiles(src, (file) => !file.endsWith('.test.ts')),
  { outdir: path.join(root, 'dist'), outbase: src, sourcemap: 'linked' },
);
