// Runs API test files on one or both databases from ONE pool of file slots (scripts/test.sh):
//   node --import tsx test/support/run-files.ts --db pglite --db postgres FILE...
// Each (database, file) pair is a process of its own (`node --test-reporter=spec FILE`, what
// `node --test` runs per file), with TEST_DB set. The pairs of both databases start longest first,
// so the long files overlap each other and the cores stay busy to the end (decisions.md, the suite's
// wall time). A file's output is kept whole: it goes to the log of its database when the file ends
// (never interleaved with another file's), and the console gets one line per file, and the whole
// output of every failed file.
// Environment: TEST_CONCURRENCY (files at once, default 4), TEST_LOG_DIR (where <db>.log are
// written; default a temporary directory), TEST_TIMINGS (a file receiving one line per file:
// "<wall s>\t<cpu s>\t<passed|failed>\t<db>\t<file>\t<children cpu s>"), TEST_PHASES (a file receiving one line per
// database: "<db>\t<start epoch ms>\t<end epoch ms>\t<passed|failed>\t<load average at its end>"),
// TEST_VERBOSE=1 (print every
// file's whole output when it ends, not only failed ones').
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { SourceMap } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** `none`: files with no database (the unit tests, scripts/test.sh run_unit). */
type Db = 'pglite' | 'postgres' | 'none';

/**
 * Seconds each file took on each database (pglite, postgres) in a fresh-clone CI run on this 2-core
 * machine (session 10; files of 25 s or more); the
 * order of a fresh clone's first run. A run's own times (TIMINGS_CACHE) take over once there is
 * one. A stale or missing entry only costs order, never a test: every file given is run, and only those.
 */
const EXPECTED: Record<string, [number, number]> = {
  'test/api/local-web.test.ts': [0, 273],
  'test/api/fleet-netns.test.ts': [0, 190],
  'test/api/local-web-domains.test.ts': [0, 209],
  'test/api/worker-process.test.ts': [18, 169],
  'test/api/hostile-tenant-files.test.ts': [0, 129],
  'test/api/reliability-suite.test.ts': [0, 115],
  'test/api/reliability.test.ts': [0, 105],
  'test/api/fleet-moves.test.ts': [0, 93],
  'test/api/fleet-moves-faults.test.ts': [0, 120],
  'test/api/cli.test.ts': [79, 70],
  'test/api/console-account-browser.test.ts': [79, 0],
  'test/api/sftp.test.ts': [0, 160],
  'test/api/ssh-shell.test.ts': [0, 69],
  'test/api/startup.test.ts': [66, 31],
  'test/api/security.test.ts': [64, 43],
  'test/api/fleet-agents.test.ts': [0, 58],
  'test/api/local-web-sign-in-browser.test.ts': [0, 57],
  'test/api/dry-run.test.ts': [53, 45],
  'test/api/webhooks.test.ts': [53, 41],
  'test/api/certificates.test.ts': [48, 29],
  'test/api/console-browser.test.ts': [44, 0],
  'test/api/hostile-tenant-reach.test.ts': [0, 42],
  'test/api/console-pages-browser.test.ts': [41, 0],
  'test/api/site-reports.test.ts': [31, 27],
  'test/api/fuzz.test.ts': [31, 20],
  'test/api/site-transfers.test.ts': [29, 29],
  'test/api/auth-load.test.ts': [28, 28],
  'test/api/local-acme.test.ts': [0, 27],
  'test/api/pglite-template.test.ts': [25, 0],
  'test/api/backups.test.ts': [25, 21],
  'test/api/local-driver.test.ts': [25, 23],
};
/** Files not in EXPECTED nor in the last run's times. */
const DEFAULT_SECONDS = 15;
/** The last run's per-file times (written at the end of every run that ran all of a database's files). */
const TIMINGS_CACHE = path.resolve('.tmp/test-timings.tsv');

const args = process.argv.slice(2);
const dbs: Db[] = [];
const files: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i] as string;
  if (arg === '--db') {
    const db = args[++i];
    if (db !== 'pglite' && db !== 'postgres' && db !== 'none')
      throw new Error(`--db pglite|postgres|none, not ${db}`);
    dbs.push(db);
  } else files.push(path.relative(process.cwd(), path.resolve(arg)));
}
if (dbs.length === 0) dbs.push((process.env.TEST_DB as Db | undefined) ?? 'pglite');

function lastRunSeconds(): Map<string, number> {
  const known = new Map<string, number>();
  if (!fs.existsSync(TIMINGS_CACHE)) return known;
  for (const line of fs.readFileSync(TIMINGS_CACHE, 'utf8').split('\n')) {
    const [wall, , , db, file] = line.split('\t');
    if (file) known.set(`${db}\t${file}`, Number(wall));
  }
  return known;
}
const known = lastRunSeconds();
const expected = (db: Db, file: string) =>
  known.get(`${db}\t${file}`) ?? EXPECTED[file]?.[db === 'pglite' ? 0 : 1] ?? DEFAULT_SECONDS;

/**
 * The one database a file runs on when its subject is not the database (docs/decisions.md #112): a
 * line `// test-db: postgres` (or pglite) among its first 40. Every other file runs on each database
 * given; a file whose own database is not among them runs on those given (it always runs).
 */
function ownDb(file: string): Db | null {
  const head = fs.readFileSync(file, 'utf8').split('\n', 40).join('\n');
  const match = head.match(/^\/\/ test-db: (pglite|postgres)\b/m);
  return (match?.[1] as Db | undefined) ?? null;
}

interface Job {
  db: Db;
  file: string;
}
const queue: Job[] = files
  .flatMap((file) => {
    const own = ownDb(file);
    const on = own && dbs.includes(own) ? [own] : dbs;
    if (on.length < dbs.length) console.log(`${file}: on ${on.join(', ')} only (its test-db line)`);
    return on.map((db) => ({ db, file }));
  })
  .sort((a, b) => expected(b.db, b.file) - expected(a.db, a.file) || a.file.localeCompare(b.file));

// The test processes run JavaScript compiled from src/ and test/ (scripts/compile-tests.mjs, about a
// second): no loader hooks in them (docs/decisions.md #121). scripts/test.sh compiles once per run
// (TEST_COMPILED=1); run alone, this compiles, so it is never stale.
if (process.env.TEST_COMPILED !== '1') {
  execFileSync(process.execPath, ['scripts/compile-tests.mjs'], { stdio: 'inherit' });
}
const COMPILED = '.tmp/test-dist';
const compiled = (file: string) => `./${path.join(COMPILED, file.replace(/\.ts$/, '.js'))}`;
/** An API test file's bundle (scripts/compile-tests.mjs), or its compiled file for a file outside test/api. */
const BUNDLED = '.tmp/test-bundle';
const entryOf = (file: string) => {
  const bundled = path.join(BUNDLED, path.basename(file).replace(/\.ts$/, '.js'));
  return file.startsWith('test/api/') && fs.existsSync(bundled) ? `./${bundled}` : compiled(file);
};

/**
 * A file's output with every place in the bundle (`.tmp/test-bundle/chunk-X.js:L:C`) named by its
 * TypeScript file and line, from the bundle's source maps, as `--enable-source-maps` would print it:
 * done here, for the output kept, because node decoding each process's maps at start cost about
 * 0.5 CPU-s per test process (docs/decisions.md).
 */
const maps = new Map<string, SourceMap | null>();
function unbundle(output: string): string {
  return output.replace(
    /(?:file:\/\/)?[^\s()'"]*\.tmp\/test-bundle\/([\w.-]+\.js):(\d+):(\d+)/g,
    (whole, name: string, line: string, column: string) => {
      let map = maps.get(name);
      if (map === undefined) {
        try {
          map = new SourceMap(JSON.parse(fs.readFileSync(path.join(BUNDLED, `${name}.map`), 'utf8')));
        } catch {
          map = null;
        }
        maps.set(name, map);
      }
      const entry = map?.findEntry(Number(line) - 1, Number(column) - 1);
      if (!entry || !('originalSource' in entry) || !entry.originalSource) return whole;
      const source = entry.originalSource.startsWith('file://')
        ? new URL(entry.originalSource).pathname
        : path.resolve(BUNDLED, entry.originalSource);
      return `${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
    },
  );
}

const concurrency = Math.max(1, Number(process.env.TEST_CONCURRENCY || 4));
/** A file's process still running this long after its summary line is killed (its counts decide). */
const EXIT_GRACE_SECONDS = 30;
/** A file's process running this long in all is killed and fails (TEST_FILE_TIMEOUT_SECONDS). */
const FILE_TIMEOUT_SECONDS = Math.max(60, Number(process.env.TEST_FILE_TIMEOUT_SECONDS || 1200));
const verbose = process.env.TEST_VERBOSE === '1';
const logDir = process.env.TEST_LOG_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'hp-test-'));
fs.mkdirSync(logDir, { recursive: true });
const usageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hp-usage-'));
const logs = new Map(dbs.map((db) => [db, path.join(logDir, `${db}.log`)]));
for (const log of logs.values()) fs.writeFileSync(log, '');

const phases = new Map(dbs.map((db) => [db, { start: 0, end: 0, failed: false, load: '' }]));
const timings: string[] = [];
const failures: { job: Job; output: string }[] = [];
let done = 0;
const total = queue.length;

/** `ℹ pass 12` and the like at the end of the spec reporter's output. */
const count = (output: string, what: string) =>
  Number(output.match(new RegExp(`^ℹ ${what} (\\d+)`, 'm'))?.[1] ?? 0);

function runJob(job: Job): Promise<void> {
  const phase = phases.get(job.db) as { start: number; end: number; failed: boolean; load: string };
  if (phase.start === 0) phase.start = Date.now();
  const started = performance.now();
  const usageFile = path.join(usageDir, `${job.db}-${job.file.replaceAll('/', '_')}`);
  const entry = entryOf(job.file);
  const child = spawn(
    process.execPath,
    [
      // Stack traces name the .ts files and lines: inline source maps for the compiled files, the
      // bundles' maps by unbundle() when the output is kept.
      ...(entry.startsWith(`./${BUNDLED}/`) ? [] : ['--enable-source-maps']),
      // Before any application module (test/support/password-hashes.ts).
      '--import',
      compiled('test/support/password-hashes.ts'),
      '--import',
      compiled('test/support/file-usage.ts'),
      '--test-reporter=spec',
      // e.g. TEST_NODE_ARGS="--cpu-prof --cpu-prof-dir=.tmp/prof": a profile of every test process.
      ...(process.env.TEST_NODE_ARGS ?? '').split(' ').filter(Boolean),
      entry,
    ],
    {
      env: { ...process.env, TEST_DB: job.db, TEST_FILE_USAGE: usageFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const chunks: Buffer[] = [];
  // A process that hangs: killed, so that a run ends in bounded time (watchdog below).
  let hung: 'after its summary' | 'in its tests' | null = null;
  const kill = (why: typeof hung) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    hung = why;
    child.kill('SIGKILL');
    // A daemon the file started may hold its output open: 'close' waits for no more than this.
    setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
    }, 5000).unref();
  };
  const overall = setTimeout(() => kill('in its tests'), FILE_TIMEOUT_SECONDS * 1000);
  let summarized: NodeJS.Timeout | null = null;
  const watch = (c: Buffer) => {
    chunks.push(c);
    // The spec reporter's last line: every test has ended and the event loop was empty. A process
    // still alive long after it is stuck in node's own teardown (a futex wait seen once in CI, no
    // child, no handle of ours), not in a test.
    if (!summarized && c.includes('ℹ duration_ms'))
      summarized = setTimeout(() => kill('after its summary'), EXIT_GRACE_SECONDS * 1000);
  };
  child.stdout.on('data', watch);
  child.stderr.on('data', watch);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(overall);
      if (summarized) clearTimeout(summarized);
      const wall = (performance.now() - started) / 1000;
      let output = unbundle(Buffer.concat(chunks).toString());
      // No file (a process killed before its exit hook): NaN, printed as such.
      const [cpu = Number.NaN, children = Number.NaN] = (
        fs.existsSync(usageFile) ? fs.readFileSync(usageFile, 'utf8') : ''
      )
        .split(' ')
        .map((n) => (n ? Number(n) : Number.NaN)) as [number, number];
      // Hung after its summary: the summary's counts decide; said loudly either way.
      const exited = hung === 'after its summary' ? 0 : code;
      if (hung)
        output += `\n!! killed: the process hung ${hung} (${hung === 'after its summary' ? `${EXIT_GRACE_SECONDS} s after its last line` : `${FILE_TIMEOUT_SECONDS} s in all`})\n`;
      const passed = exited === 0 && count(output, 'fail') === 0 && count(output, 'cancelled') === 0;
      phase.end = Date.now();
      phase.load = os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ');
      if (!passed) phase.failed = true;
      const header = `── ${job.db} ${job.file}: ${passed ? 'passed' : `FAILED (exit ${signal ?? code})`}${hung ? ` (hung ${hung}: killed)` : ''}, ${wall.toFixed(1)} s`;
      fs.appendFileSync(logs.get(job.db) as string, `${header}\n${output}\n`);
      timings.push(
        `${wall.toFixed(1)}\t${cpu.toFixed(1)}\t${passed ? 'passed' : 'failed'}\t${job.db}\t${job.file}\t${children.toFixed(1)}`,
      );
      done++;
      console.log(
        `${passed ? '✔' : '✖'} [${done}/${total}] ${job.db.padEnd(8)} ${job.file} ${hung ? `(hung ${hung}: killed) ` : ''}` +
          `(${count(output, 'pass')} passed, ${count(output, 'fail')} failed, ${wall.toFixed(1)} s, ${cpu.toFixed(1)} s CPU, ${children.toFixed(1)} s CPU of its children)`,
      );
      if (verbose) console.log(output);
      if (!passed) failures.push({ job, output });
      resolve();
    });
  });
}

/**
 * The machine's CPU over the last interval: the share of all cores idle (os.cpus() times, the whole
 * machine's: what else runs on it counts too). Null on the first call.
 */
function idleMeter() {
  let last: { idle: number; total: number } | null = null;
  return () => {
    let idle = 0;
    let total = 0;
    for (const { times } of os.cpus()) {
      idle += times.idle;
      total += times.user + times.nice + times.sys + times.idle + times.irq;
    }
    const previous = last;
    last = { idle, total };
    if (!previous || total <= previous.total) return null;
    return (idle - previous.idle) / (total - previous.total);
  };
}

/**
 * TEST_CONCURRENCY files at once, and more (up to TEST_MAX_CONCURRENCY) while the cores stay idle:
 * most files wait on daemons, timers and polling much of their time, so a fixed number of slots left
 * a third of a quiet 2-core machine idle (docs/decisions.md #231). One more file starts when a
 * quarter of the cores were idle over the last ADMIT_WINDOW_MS (at most one per window, so its own
 * load shows before the next); a busy machine (a shared one) keeps TEST_CONCURRENCY.
 */
const maxConcurrency = Math.max(concurrency, Number(process.env.TEST_MAX_CONCURRENCY || 8));
const ADMIT_WINDOW_MS = 5000;
const ADMIT_IDLE = 0.25;
let running = 0;
let mostAtOnce = 0;
let admitted = 0;
const busy: number[] = [];
await new Promise<void>((resolve) => {
  if (total === 0) return resolve();
  const start = () => {
    const job = queue.shift();
    if (!job) return false;
    running++;
    mostAtOnce = Math.max(mostAtOnce, running);
    void runJob(job).then(() => {
      running--;
      while (running < concurrency && start()) {}
      if (running === 0 && queue.length === 0) {
        clearInterval(timer);
        resolve();
      }
    });
    return true;
  };
  const idle = idleMeter();
  idle();
  const timer = setInterval(() => {
    const share = idle();
    if (share === null) return;
    busy.push(1 - share);
    if (running >= maxConcurrency || queue.length === 0 || share < ADMIT_IDLE) return;
    if (start()) admitted++;
  }, ADMIT_WINDOW_MS);
  while (running < concurrency && start()) {}
});
fs.rmSync(usageDir, { recursive: true, force: true });
if (busy.length > 0)
  console.log(
    `== files at once: ${concurrency} and up to ${mostAtOnce} (${admitted} started beyond ${concurrency} while cores were idle); ` +
      `the machine's CPU busy ${Math.round((100 * busy.reduce((a, b) => a + b, 0)) / busy.length)} % of the time (all its cores)`,
  );

for (const { job, output } of failures) {
  console.log(`\n== FAILED: ${job.file} on ${job.db} (its whole output; logs in ${logDir})\n${output}`);
}
if (process.env.TEST_TIMINGS) fs.writeFileSync(process.env.TEST_TIMINGS, `${timings.join('\n')}\n`);
if (process.env.TEST_PHASES) {
  // A database no file ran on (e.g. `files` of postgres-only files) has no phase to report.
  const lines = [...phases]
    .filter(([, p]) => p.start > 0)
    .map(([db, p]) => `${db}\t${p.start}\t${p.end}\t${p.failed ? 'failed' : 'passed'}\t${p.load}\n`);
  fs.writeFileSync(process.env.TEST_PHASES, lines.join(''));
}
// The next run's order: only from a run of every API file (a few files' times would be a poor guide).
if (
  !dbs.includes('none') &&
  files.length === fs.readdirSync('test/api').filter((f) => f.endsWith('.test.ts')).length
) {
  fs.mkdirSync(path.dirname(TIMINGS_CACHE), { recursive: true });
  fs.writeFileSync(TIMINGS_CACHE, `${timings.join('\n')}\n`);
}
process.exitCode = failures.length > 0 ? 1 : 0;
