#!/usr/bin/env node
// Runs the compiled CLI. The build happens once, at `npm ci` (the `prepare` script) or `npm run build`;
// a start compiles only when the sources are newer than the last build (a checkout that moved, an edit).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'dist', '.build-stamp');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    const mtime = entry.isDirectory() ? newestMtime(full) : fs.statSync(full).mtimeMs;
    if (mtime > newest) newest = mtime;
  }
  return newest;
}

function isStale() {
  const sources = path.join(root, 'src');
  if (!fs.existsSync(sources)) return false; // an installed package: dist is all there is
  if (!fs.existsSync(stamp)) return true;
  const built = fs.statSync(stamp).mtimeMs;
  const config = path.join(root, 'tsconfig.json');
  // A new migration rebuilds the embedded database template too (dist/pglite-template).
  const migrations = path.join(root, 'drizzle');
  return (
    newestMtime(sources) > built ||
    fs.statSync(config).mtimeMs > built ||
    (fs.existsSync(migrations) && newestMtime(migrations) > built)
  );
}

if (isStale()) {
  console.error('hostplane: sources changed since the last build; compiling (npm run build)');
  const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
// Issue 20: the bundle of the same build (scripts/bundle.mjs: a few files instead of ~900 modules).
const bundle = path.join(root, 'dist', 'bundle', 'cli.js');
await import(fs.existsSync(bundle) ? '../dist/bundle/cli.js' : '../dist/cli.js');
