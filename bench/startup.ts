/**
 * Issues 14 and 20: start-up time and idle memory, measured from outside as a new user starts it:
 *   - seconds from spawning the command to the first 200 of GET /healthz, on a fresh data dir (or
 *     fresh PostgreSQL database) and on a reopen of the same one;
 *   - resident memory (VmRSS) of the server process IDLE_MS after that answer.
 * Each start is made two ways, so npm's own share is visible: `npm start` (the command the README
 * names; npm, a shell, then `node bin/hostplane.js serve`) and `node bin/hostplane.js serve`.
 *
 * With `--base DIR` (a built checkout of another commit, e.g. main) the same starts of both trees
 * are interleaved round by round (A B, then B A, ...), so a busy shared machine slows both alike;
 * the report gives min / median / max per tree and the ratio of medians.
 *
 *   npm run bench:startup                                   this tree, both databases, 5 rounds
 *   npm run bench:startup -- --base /tmp/startup-base --runs 7 --db pglite
 *
 * Writes bench/results/startup.md (tables, uptime before and after) and startup.json (every start).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { BENCH_PG_URL } from './databases.js';
import { freePort, rssMb } from './load.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const IDLE_MS = 5000;

type Db = 'pglite' | 'postgres';
type Launcher = 'npm start' | 'node bin/hostplane.js';
type Kind = 'fresh' | 'reopen';
interface Sample {
  tree: string;
  db: Db;
  launcher: Launcher;
  kind: Kind;
  round: number;
  seconds: number;
  /**
   * CPU seconds (user + system) the command's processes (npm, its shell, node) had used when the
   * first 200 arrived: what a start costs, much less swayed by other work on the machine than wall time.
   */
  cpuSeconds: number;
  /** Only measured on the `npm start` runs (the server process is the same either way). */
  rssMb: number | null;
}

/** Every descendant pid of `pid` (npm -> sh -> node). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    let children = '';
    try {
      children = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    } catch {}
    for (const child of children ? children.split(' ').map(Number) : [])
      out.push(child, ...descendants(child));
  }
  return out;
}

const TICKS_PER_SECOND = 100; // USER_HZ, fixed at 100 on Linux

/** utime + stime of live processes, in seconds (fields 14 and 15 of /proc/PID/stat). */
function cpuSecondsOf(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {}
  }
  return ticks / TICKS_PER_SECOND;
}

async function startOnce(root: string, launcher: Launcher, env: Record<string, string>, idleMs: number) {
  const port = await freePort();
  const [command, args] =
    launcher === 'npm start'
      ? ['npm', ['start', '--silent']]
      : [process.execPath, ['bin/hostplane.js', 'serve']];
  const began = performance.now();
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  const exited = new Promise((r) => child.once('exit', r));
  const url = `http://127.0.0.1:${port}/healthz`;
  let seconds = Number.NaN;
  let cpuSeconds = Number.NaN;
  for (let tries = 0; tries < 6000; tries++) {
    try {
      const res = await fetch(url);
      if (res.status === 200) {
        seconds = (performance.now() - began) / 1000;
        cpuSeconds = cpuSecondsOf([child.pid ?? 0, ...descendants(child.pid ?? 0)]);
        break;
      }
    } catch {}
    await new Promise((r) => setTimeout(r, 10));
  }
  let rss: number | null = null;
  if (idleMs > 0) {
    await new Promise((r) => setTimeout(r, idleMs));
    // The node process of bin/hostplane.js (npm and its shell are a few MB each): the largest one.
    rss = Math.max(rssMb(child.pid ?? 0), ...descendants(child.pid ?? 0).map(rssMb));
  }
  process.kill(-(child.pid ?? 0), 'SIGTERM');
  await exited;
  return { seconds, cpuSeconds, rss };
}

async function withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: `${BENCH_PG_URL}/postgres` });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A fresh place to start in: an empty data dir, and on PostgreSQL an empty database. */
async function freshTarget(db: Db) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `hp-startup-${db}-`));
  const env: Record<string, string> = {
    DATA_DIR: path.join(dataDir, 'data'),
    DATABASE_URL: '',
    REDIS_URL: '',
  };
  let name: string | null = null;
  if (db === 'postgres') {
    name = `hp_startup_${randomBytes(5).toString('hex')}`;
    await withAdmin((c) => c.query(`create database ${name}`));
    env.DATABASE_URL = `${BENCH_PG_URL}/${name}`;
  }
  return {
    env,
    drop: async () => {
      if (name) await withAdmin((c) => c.query(`drop database if exists ${name} with (force)`));
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? Number.NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};
const fmt = (xs: number[], digits: number) =>
  xs.length === 0
    ? ''
    : `${Math.min(...xs).toFixed(digits)} / **${median(xs).toFixed(digits)}** / ${Math.max(...xs).toFixed(digits)}`;

async function main() {
  const base = arg('base');
  const runs = Number(arg('runs') ?? 5);
  const dbs = (arg('db') ? [arg('db')] : ['pglite', 'postgres']) as Db[];
  const trees = base
    ? [
        { name: 'before', root: path.resolve(base) },
        { name: 'after', root: ROOT },
      ]
    : [{ name: 'this tree', root: ROOT }];
  const launchers: Launcher[] = ['npm start', 'node bin/hostplane.js'];
  const uptimeBefore = execFileSync('uptime').toString().trim();
  const samples: Sample[] = [];
  const loads: number[] = [];
  for (let round = 1; round <= runs; round++) {
    for (const db of dbs) {
      // Alternate which tree goes first, so neither always starts on a warmer (or busier) machine.
      for (const tree of round % 2 ? trees : [...trees].reverse()) {
        for (const launcher of launchers) {
          const target = await freshTarget(db);
          try {
            for (const kind of ['fresh', 'reopen'] as const) {
              const idle = launcher === 'npm start' ? IDLE_MS : 0;
              const { seconds, cpuSeconds, rss } = await startOnce(tree.root, launcher, target.env, idle);
              const sample = { tree: tree.name, db, launcher, kind, round, seconds, cpuSeconds, rssMb: rss };
              samples.push(sample);
              console.log(JSON.stringify(sample));
            }
          } finally {
            await target.drop();
          }
        }
      }
      loads.push(os.loadavg()[0] ?? 0);
    }
  }

  const pick = (tree: string, db: Db, launcher: Launcher, kind: Kind) =>
    samples.filter((s) => s.tree === tree && s.db === db && s.launcher === launcher && s.kind === kind);
  const rows: string[] = [];
  const ratioRows: string[] = [];
  for (const db of dbs) {
    for (const kind of ['fresh', 'reopen'] as const) {
      for (const launcher of launchers) {
        for (const tree of trees) {
          const got = pick(tree.name, db, launcher, kind);
          const rss = got.flatMap((s) => (s.rssMb === null ? [] : [s.rssMb]));
          rows.push(
            `| ${db} | ${kind} | \`${launcher}\` | ${tree.name} | ${fmt(
              got.map((s) => s.seconds),
              2,
            )} | ${fmt(
              got.map((s) => s.cpuSeconds),
              2,
            )} | ${fmt(rss, 0)} |`,
          );
        }
        if (trees.length === 2) {
          const [before, after] = trees.map((t) => pick(t.name, db, launcher, kind));
          const time =
            median((after ?? []).map((s) => s.seconds)) / median((before ?? []).map((s) => s.seconds));
          const rssOf = (xs: Sample[] = []) => median(xs.flatMap((s) => (s.rssMb === null ? [] : [s.rssMb])));
          const mem = launcher === 'npm start' ? (rssOf(after) / rssOf(before)).toFixed(2) : '';
          const cpuOf = (xs: Sample[] = []) => median(xs.map((s) => s.cpuSeconds));
          const cpu = cpuOf(after) / cpuOf(before);
          ratioRows.push(
            `| ${db} | ${kind} | \`${launcher}\` | ${time.toFixed(2)} | ${cpu.toFixed(2)} | ${mem} |`,
          );
        }
      }
      // npm's own share: the median of `npm start` minus the median of `node bin/hostplane.js`.
      for (const tree of trees) {
        const viaNpm = median(pick(tree.name, db, 'npm start', kind).map((s) => s.seconds));
        const direct = median(pick(tree.name, db, 'node bin/hostplane.js', kind).map((s) => s.seconds));
        const cpuNpm = median(pick(tree.name, db, 'npm start', kind).map((s) => s.cpuSeconds));
        const cpuDirect = median(pick(tree.name, db, 'node bin/hostplane.js', kind).map((s) => s.cpuSeconds));
        rows.push(
          `| ${db} | ${kind} | npm's share (difference of medians) | ${tree.name} | ${(viaNpm - direct).toFixed(2)} | ${(cpuNpm - cpuDirect).toFixed(2)} | |`,
        );
      }
    }
  }
  const report = [
    '# Start-up: seconds to the first 200 of /healthz, and idle memory',
    '',
    `${new Date().toISOString()} · Node ${process.version} · ${runs} rounds, trees interleaved` +
      (base ? ` · before = \`${base}\`, after = this tree` : ''),
    '',
    `uptime before: \`${uptimeBefore}\` · after: \`${execFileSync('uptime').toString().trim()}\` · ` +
      `1-min load average at the end of each round: ${loads.map((l) => l.toFixed(1)).join(', ')}`,
    '',
    `| database | start | command | tree | seconds min / **median** / max | CPU seconds to that answer | RSS MB ${IDLE_MS / 1000} s after, min / **median** / max |`,
    '|---|---|---|---|---:|---:|---:|',
    ...rows,
    '',
    ...(ratioRows.length
      ? [
          '| database | start | command | after / before, median seconds | after / before, median CPU seconds | after / before, median RSS |',
          '|---|---|---|---:|---:|---:|',
          ...ratioRows,
          '',
        ]
      : []),
  ].join('\n');
  fs.mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench', 'results', 'startup.md'), report);
  fs.writeFileSync(
    path.join(ROOT, 'bench', 'results', 'startup.json'),
    JSON.stringify({ uptimeBefore, base: base ?? null, runs, loads, samples }, null, 1),
  );
  console.log(`\n${report}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
