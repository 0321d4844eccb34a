/**
 * Issue 14: start-up time and idle memory of `npm start` (bin/hostplane.js serve on the compiled
 * build), on a fresh data dir and on a reopen, on PGlite and PostgreSQL:
 *   - time from spawning `npm start` to the first 200 of GET /healthz;
 *   - resident memory (VmRSS) of the server process IDLE_MS after that answer.
 *
 *   npx tsx bench/startup.ts               both databases, 1 fresh start and 2 reopens each
 *   npx tsx bench/startup.ts pglite 3      one database, 3 reopens
 *
 * Prints a markdown table (and writes bench/results/startup.md); record `uptime` beside it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { BENCH_PG_URL } from './databases.js';
import { freePort } from './load.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const IDLE_MS = 5000;

/** Every descendant pid of `pid` (npm -> sh -> node). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const children = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    for (const child of children ? children.split(' ').map(Number) : [])
      out.push(child, ...descendants(child));
  }
  return out;
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

async function startOnce(env: Record<string, string>) {
  const port = await freePort();
  const began = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  const url = `http://127.0.0.1:${port}/healthz`;
  let ms = Number.NaN;
  for (let tries = 0; tries < 1200; tries++) {
    try {
      const res = await fetch(url);
      if (res.status === 200) {
        ms = performance.now() - began;
        break;
      }
    } catch {}
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, IDLE_MS));
  // The node process of bin/hostplane.js (npm and its shell are a few MB each): the largest one.
  const rss = Math.max(
    ...descendants(child.pid ?? 0).map((pid) => {
      try {
        return rssMb(pid);
      } catch {
        return 0;
      }
    }),
  );
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(-(child.pid ?? 0), 'SIGTERM');
  await exited;
  return { ms, rss };
}

async function main() {
  const [only, reopensArg] = process.argv.slice(2);
  const reopens = Number(reopensArg ?? 2);
  const rows: string[] = [];
  const uptimeBefore = execFileSync('uptime').toString().trim();
  for (const db of ['pglite', 'postgres'].filter((d) => !only || d === only)) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `hp-startup-${db}-`));
    const env: Record<string, string> = {
      DATA_DIR: path.join(dataDir, 'data'),
      DATABASE_URL: '',
      REDIS_URL: '',
    };
    let drop = async () => {};
    if (db === 'postgres') {
      const name = `hp_startup_${randomBytes(5).toString('hex')}`;
      const admin = new pg.Client({ connectionString: `${BENCH_PG_URL}/postgres` });
      await admin.connect();
      await admin.query(`create database ${name}`);
      await admin.end();
      env.DATABASE_URL = `${BENCH_PG_URL}/${name}`;
      drop = async () => {
        const c = new pg.Client({ connectionString: `${BENCH_PG_URL}/postgres` });
        await c.connect();
        await c.query(`drop database if exists ${name} with (force)`);
        await c.end();
      };
    }
    try {
      for (let i = 0; i <= reopens; i++) {
        const { ms, rss } = await startOnce(env);
        const kind = i === 0 ? 'fresh data dir / database' : `reopen ${i}`;
        rows.push(`| ${db} | ${kind} | ${(ms / 1000).toFixed(2)} | ${rss.toFixed(0)} |`);
        console.log(rows.at(-1));
      }
    } finally {
      await drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const report = [
    '# npm start: time to first answer and idle memory',
    '',
    `${new Date().toISOString()} · Node ${process.version} · uptime before: \`${uptimeBefore}\` · after: \`${execFileSync('uptime').toString().trim()}\``,
    '',
    `| database | start | seconds to first 200 of /healthz | RSS MB ${IDLE_MS / 1000} s after |`,
    '|---|---|---:|---:|',
    ...rows,
    '',
  ].join('\n');
  fs.mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench', 'results', 'startup.md'), report);
  console.log(`\n${report}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
