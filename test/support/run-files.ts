// Runs API test files the way `node --test` does (a process per file, the spec reporter), but in the
// order given here, which `node --test` (Node 20) does not keep: it sorts its files. The longest files
// start first, so none of them is left running alone at the end of a phase. scripts/test.sh runs it:
//   node --import tsx test/support/run-files.ts FILE...
// TEST_CONCURRENCY: files at once (default 2; scripts/test.sh passes its own). TEST_TIMINGS: a file that receives one line per test
// file, "<seconds>\t<passed|failed>\t<file>" (its wall time in its own process, imports included).
import fs from 'node:fs';
import path from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

/**
 * The longest API files, longest first (from the per-file wall times scripts/test.sh prints at the
 * end of a run). Files not named here follow, in name order. A stale entry only costs order, never
 * a test: every file given is run, and only those.
 */
const LONGEST_FIRST = [
  // PostgreSQL only (real processes, outages of 10-30 s): skipped at once on PGlite.
  'test/api/reliability.test.ts',
  'test/api/reliability-suite.test.ts',
  'test/api/security.test.ts',
  'test/api/site-transfers.test.ts',
  'test/api/site-reports.test.ts',
  // Child processes (serve, seed, migrate): slow to start on a loaded machine.
  'test/api/cli.test.ts',
  'test/api/backups.test.ts',
  'test/api/domains.test.ts',
  'test/api/certificates.test.ts',
  'test/api/rate-limit.test.ts',
  'test/api/worker-process.test.ts',
  'test/api/account-users.test.ts',
  'test/api/local-driver.test.ts',
  'test/api/jobs-authz.test.ts',
  'test/api/sites.test.ts',
  'test/api/installs.test.ts',
  'test/api/jobs-drivers.test.ts',
];

const files = process.argv.slice(2).map((f) => path.relative(process.cwd(), path.resolve(f)));
const rank = (f: string) => {
  const i = LONGEST_FIRST.indexOf(f);
  return i === -1 ? LONGEST_FIRST.length : i;
};
const ordered = [...files].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));

const concurrency = Number(process.env.TEST_CONCURRENCY || 2);
const timings = process.env.TEST_TIMINGS ? fs.createWriteStream(process.env.TEST_TIMINGS) : null;

const stream = run({ files: ordered.map((f) => path.resolve(f)), concurrency });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
stream.on('test:complete', (data) => {
  // The runner's own test of each file is the one named by the file's path.
  if (!timings || data.nesting !== 0 || !data.file || data.name !== data.file) return;
  const seconds = (data.details.duration_ms / 1000).toFixed(1);
  timings.write(
    `${seconds}\t${data.details.passed ? 'passed' : 'failed'}\t${path.relative(process.cwd(), data.file)}\n`,
  );
});
stream.on('end', () => timings?.end());
stream.compose(new spec()).pipe(process.stdout);
