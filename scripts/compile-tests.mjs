// The suite's test processes (test/support/run-files.ts) run JavaScript compiled from src/ and test/
// here, file by file (esbuild: types stripped, no bundling, an inline source map so stack traces name
// the .ts lines), into .tmp/test-dist/. Under `--import tsx` every module of a process (~960, TypeBox's
// 683 among them) went through tsx's loader hooks on their own thread: about 1 CPU-second of each API
// test process's fixed cost, ~130 CPU-seconds a run (docs/decisions.md #121). Type checking stays
// `npm run typecheck`'s. Run by scripts/test.sh before the API phase (about a second).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle, compileFiles, externalPackages, ownImportMetaUrl, tsFiles } from './compile-files.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const TEST_DIST = path.join(root, '.tmp', 'test-dist');

fs.rmSync(TEST_DIST, { recursive: true, force: true });
await compileFiles([...tsFiles(path.join(root, 'src')), ...tsFiles(path.join(root, 'test'))], {
  outdir: TEST_DIST,
  outbase: root,
  sourcemap: 'inline',
});
// TypeBox as one set of files (its ~680 small modules cost each test process ~0.3 CPU-s to load; the
// server's bundle does the same, scripts/bundle.mjs): .tmp/test-dist/node_modules/typebox is found
// before the root's node_modules by every compiled file, and only they import typebox at run time.
const typebox = JSON.parse(fs.readFileSync(path.join(root, 'node_modules/typebox/package.json'), 'utf8'));
const typeboxDir = path.join(TEST_DIST, 'node_modules', 'typebox');
const entries = Object.keys(typebox.exports).map((sub) => (sub === '.' ? 'index' : sub.slice(2)));
await bundle({
  entryPoints: Object.fromEntries(entries.map((e) => [e, e === 'index' ? 'typebox' : `typebox/${e}`])),
  outdir: typeboxDir,
});
fs.writeFileSync(
  path.join(typeboxDir, 'package.json'),
  JSON.stringify({
    name: 'typebox',
    version: typebox.version,
    type: 'module',
    exports: Object.fromEntries(entries.map((e) => [e === 'index' ? '.' : `./${e}`, `./${e}.js`])),
  }),
);
// What the code reads relative to its own file (`new URL('../../drizzle', import.meta.url)` and the
// like) is found from .tmp/test-dist as from the sources.
for (const link of ['drizzle', 'dist', 'packages', 'package.json', path.join('test', 'reference')]) {
  fs.symlinkSync(path.join(root, link), path.join(TEST_DIST, link));
}

// The API test files bundled (.tmp/test-bundle/<name>.test.js, what they share in chunks): a test
// process then loads a few files instead of ~300 of ours and ~600 CommonJS modules of fastify, ajv,
// pg and the others, whose resolution and wrapping were most of a file's fixed cost (docs/decisions.md).
// Built from the compiled files above, so `import.meta.url` still names each compiled file's place.
export const TEST_BUNDLE = path.join(root, '.tmp', 'test-bundle');
fs.rmSync(TEST_BUNDLE, { recursive: true, force: true });
await bundle({
  entryPoints: tsFiles(path.join(root, 'test', 'api')).map((file) =>
    path.join(TEST_DIST, path.relative(root, file)).replace(/\.ts$/, '.js'),
  ),
  outdir: TEST_BUNDLE,
  entryNames: '[name]',
  sourcemap: 'linked',
  requireShim: true,
  plugins: [externalPackages, ownImportMetaUrl({ under: TEST_DIST, outdir: TEST_BUNDLE })],
});
