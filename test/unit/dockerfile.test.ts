// The production image's build stage runs `npm run build` and `npm run build:packages` on only what the
// Dockerfile copies in. No Docker daemon runs in CI, so this reads the Dockerfile and checks that what
// those scripts read is copied and not excluded by .dockerignore (the build-template step once failed
// in the image because drizzle/ was not copied).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

/** The repository: the first folder above this file with a Dockerfile (from the sources or .tmp/test-dist). */
function repositoryRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'Dockerfile'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('no Dockerfile above this test');
    dir = up;
  }
  return dir;
}
const ROOT = repositoryRoot();
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** The COPY sources of each stage (`COPY --from=...` lines are not sources of the context). */
function stages(dockerfile: string): { copies: string[]; runs: string[] }[] {
  const found: { copies: string[]; runs: string[] }[] = [];
  for (const line of dockerfile.split('\n').map((l) => l.trim())) {
    if (/^FROM\s/i.test(line)) found.push({ copies: [], runs: [] });
    const stage = found.at(-1);
    if (!stage) continue;
    if (/^COPY\s/i.test(line) && !/--from=/i.test(line)) {
      const words = line.split(/\s+/).slice(1);
      stage.copies.push(...words.slice(0, -1).map((w) => w.replace(/^\.\//, '').replace(/\/$/, '')));
    }
    if (/^RUN\s/i.test(line)) stage.runs.push(line);
  }
  return found;
}

/** The scripts/*.mjs a command line runs, and the ones they import, transitively. */
function scriptsOf(command: string): Set<string> {
  const todo = [...command.matchAll(/node (scripts\/[\w-]+\.mjs)/g)].map((m) => m[1] as string);
  const seen = new Set<string>();
  while (todo.length) {
    const file = todo.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of read(file).matchAll(/from '\.\/([\w-]+\.mjs)'/g)) todo.push(`scripts/${m[1]}`);
  }
  return seen;
}

/** Whether .dockerignore leaves `file` in the build context (its patterns as plain paths and globs). */
function inContext(file: string): boolean {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  return !patterns.some((p) => {
    const source = p
      .replace(/\./g, '\\.')
      .replace(/\*\*\//g, '\0')
      .replace(/\*/g, '[^/]*')
      .replace(/\0/g, '(.*/)?');
    const glob = new RegExp(`^${source}(/|$)`);
    return glob.test(file);
  });
}

describe('the Dockerfile builds from what it copies (operations.md, the image)', () => {
  const dockerfile = read('Dockerfile');
  const all = stages(dockerfile);
  const [build] = all;
  const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;

  it('copies every script `npm run build` runs, and they are in the build context', () => {
    assert.ok(build, 'a build stage');
    assert.ok(
      build.runs.some((r) => r.includes('npm run build')),
      'the build stage runs npm run build',
    );
    for (const file of scriptsOf(scripts.build ?? '')) {
      const copied = build.copies.some((c) => c === file || file.startsWith(`${c}/`));
      assert.ok(copied, `${file} (run by npm run build) is not copied into the build stage`);
      assert.ok(inContext(file), `${file} is excluded by .dockerignore`);
    }
  });

  it('copies the migrations when the build makes the embedded database template from them', () => {
    assert.ok(build);
    if ((scripts.build ?? '').includes('build-template')) {
      assert.ok(build.copies.includes('drizzle'), 'drizzle/ is not copied into the build stage');
      assert.ok(inContext('drizzle/meta/_journal.json'));
    }
  });

  it('builds the web console from the workspaces (not their local builds) and the image serves it', () => {
    assert.ok(build);
    assert.ok(
      build.runs.some((r) => r.includes('npm run build:packages')),
      'the build stage runs npm run build:packages',
    );
    assert.ok(build.copies.includes('packages'), 'packages/ is not copied into the build stage');
    assert.ok(inContext('packages/console/src/main.tsx'));
    assert.equal(inContext('packages/console/node_modules/x'), false);
    assert.equal(inContext('packages/console/dist/index.html'), false);
    assert.match(
      dockerfile,
      /^COPY --from=build \/app\/packages\/console\/dist \.\/packages\/console\/dist$/m,
    );
  });

  it('every COPY source exists in the repository and is in the build context', () => {
    for (const stage of all) {
      for (const source of stage.copies) {
        assert.ok(fs.existsSync(path.join(ROOT, source)), `COPY ${source}: no such file`);
        assert.ok(inContext(source), `COPY ${source}: excluded by .dockerignore`);
      }
    }
  });
});
