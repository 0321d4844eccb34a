/**
 * Issue 14, jobs: createBackup requests through real HTTP against the compiled CLI, on PostgreSQL
 * (`hostplane api` and 1, 2 or 4 `hostplane worker` processes) and on PGlite (`hostplane serve`).
 * Per run: wall time from the first request to the last backup completed, backups/s, and
 * request-to-start latency (the operation's started_at minus the moment the client sent the request,
 * and minus the moment its 202 arrived). Each setup runs as a burst (a fixed number of clients
 * sending as fast as they are answered) and then at a steady rate of half its burst throughput.
 * Baseline in the same run: the API alone, no worker, answering the same requests.
 *
 *   npm run build && npm run bench:jobs      (bench/jobs.README.md; BENCH_JOBS=200 to shrink)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cloneDatabase, type DbKind, type Fixture, prepareTarget, seed, type Target } from './databases.js';
import { assertBuilt, type CliProcess, cpuSeconds, freePort, percentile, startCli } from './load.js';

const N = Number(process.env.BENCH_JOBS ?? 1000);
const CLIENTS = Number(process.env.BENCH_JOBS_CLIENTS ?? 8);
/** A steady run lasts about this long (fewer than N backups when the rate is low). */
const STEADY_SECONDS = 15;
/** The second duration: the simulated platform takes this long per backup (see the README). */
const SLOW_BACKUP_SECONDS = 5;
/** A run gives up when no backup ended for this long (a stuck queue), and reports what is left. */
const STUCK_MS = 60_000;
const OUT = new URL('./results/', import.meta.url);

interface Setup {
  db: DbKind;
  /** Separate worker processes (PostgreSQL); 0 with `serve` means its in-process worker. */
  workers: number;
  serve: boolean;
  backupSeconds: number;
}
type Arrival = { kind: 'burst'; clients: number } | { kind: 'steady'; perSecond: number };
interface Sample {
  opId: string;
  installId: string;
  sentMs: number;
  answeredMs: number;
}
interface Operation {
  id: string;
  status: string;
  started_at: string | null;
  completed_at: string | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uptime = () => execFileSync('uptime').toString().trim();

function durations(backup: number) {
  const zero = ['provision', 'copy', 'restore', 'measure_disk', 'purge_cache', 'move_site'];
  return [...zero.map((op) => `${op}=0`), `backup=${backup}`].join(',');
}

/** The API (and the workers) of one run, on a fresh copy of the seeded database. */
async function startProcesses(target: Target, setup: Setup, run: string) {
  const clone = setup.db === 'postgres' ? await cloneDatabase(target) : null;
  const env = {
    ...(clone ? { ...target.env, DATABASE_URL: clone.url } : target.serverEnv(run)),
    PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
    SIMULATED_DURATIONS: durations(setup.backupSeconds),
  };
  const started: CliProcess[] = [];
  try {
    const api = await startCli([setup.serve ? 'serve' : 'api'], env, /Hostplane is serving (\S+)\/v1 /);
    started.push(api);
    for (let i = 0; i < setup.workers; i++)
      started.push(await startCli(['worker'], env, /worker is running/));
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()));
    await clone?.drop();
    throw err;
  }
  const [api, ...workers] = started as [CliProcess, ...CliProcess[]];
  return {
    base: api.ready[1] ?? '',
    api,
    workers,
    /** Warnings and errors the processes logged (pino levels 40 and up). */
    logProblems: () =>
      started.flatMap((p) => p.output().split('\n')).filter((l) => /"level":(4|5|6)0/.test(l)),
    async stop() {
      await Promise.all(started.map((p) => p.stop()));
      await clone?.drop();
    },
  };
}

async function createBackup(base: string, headers: Record<string, string>, installId: string, i: number) {
  const sentMs = Date.now();
  try {
    const res = await fetch(`${base}/v1/installs/${installId}/backups`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ description: `bench ${i}`, notification_emails: [] }),
      signal: AbortSignal.timeout(30_000),
    });
    const answeredMs = Date.now();
    await res.arrayBuffer();
    const location = res.headers.get('location');
    if (res.status !== 202 || !location) return `HTTP ${res.status}`;
    const opId = new URL(location, base).pathname.split('/').pop() ?? '';
    return { opId, installId, sentMs, answeredMs } satisfies Sample;
  } catch (err) {
    return err instanceof Error ? err.name : 'error';
  }
}

/** Sends `n` createBackup requests, install after install, as a burst or at a steady rate. */
async function submit(
  base: string,
  headers: Record<string, string>,
  installs: string[],
  n: number,
  arrival: Arrival,
) {
  const samples: Sample[] = [];
  const errors: Record<string, number> = {};
  let inFlight = 0;
  let maxInFlight = 0;
  const one = async (i: number) => {
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    const result = await createBackup(base, headers, installs[i % installs.length] ?? '', i);
    inFlight--;
    if (typeof result === 'string') errors[result] = (errors[result] ?? 0) + 1;
    else samples.push(result);
  };
  const began = Date.now();
  if (arrival.kind === 'burst') {
    let next = 0;
    const client = async () => {
      while (next < n) await one(next++);
    };
    await Promise.all(Array.from({ length: arrival.clients }, client));
  } else {
    const sent: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const wait = began + (i * 1000) / arrival.perSecond - Date.now();
      if (wait > 0) await sleep(wait);
      sent.push(one(i));
    }
    await Promise.all(sent);
  }
  return { samples, errors, began, maxInFlight };
}

async function operationsOf(base: string, headers: Record<string, string>, installId: string) {
  const res = await fetch(`${base}/v1/installs/${installId}/operations?limit=100`, { headers });
  if (res.status !== 200)
    throw new Error(`listInstallOperations answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { results: Operation[] }).results;
}

/**
 * Waits until every submitted operation has ended, install by install, starting with the install of
 * the last request (the queue is roughly first in, first out: when it is done, most are). The times
 * come from the operations themselves, so how often this looks does not change them. Gives up after
 * {@link STUCK_MS} without progress; what did not end is then missing from the answer.
 */
async function collect(base: string, headers: Record<string, string>, samples: Sample[]) {
  const byInstall = new Map<string, Set<string>>();
  for (const s of samples) byInstall.set(s.installId, (byInstall.get(s.installId) ?? new Set()).add(s.opId));
  const last = samples.at(-1)?.installId;
  const pending = [...byInstall.keys()].sort((a, b) => Number(b === last) - Number(a === last));
  const ended = new Map<string, Operation>();
  let progress = Date.now();
  while (pending.length > 0 && Date.now() - progress < STUCK_MS) {
    const installId = pending[0] ?? '';
    const mine = byInstall.get(installId) ?? new Set();
    const ops = (await operationsOf(base, headers, installId)).filter((op) => mine.has(op.id));
    if (ops.length === mine.size && ops.every((op) => op.completed_at !== null)) {
      for (const op of ops) ended.set(op.id, op);
      pending.shift();
      progress = Date.now();
    } else await sleep(250);
  }
  return ended;
}

const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => Math.round(percentile(sorted, q));
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) };
};

/** One run: fresh processes on a fresh copy of the data, `n` requests, every job waited for. */
async function measure(target: Target, fixture: Fixture, setup: Setup, arrival: Arrival, n: number) {
  const run = `${setup.serve ? 'serve' : `w${setup.workers}`}-${arrival.kind}-${setup.backupSeconds}`;
  const procs = await startProcesses(target, setup, run);
  try {
    const headers = { authorization: fixture.authorization, 'content-type': 'application/json' };
    const listed = await fetch(`${procs.base}/v1/installs?limit=100`, { headers });
    const installs = ((await listed.json()) as { results: { id: string }[] }).results.map((i) => i.id);
    const cpu = () => ({
      api: cpuSeconds(procs.api.pid) ?? Number.NaN,
      workers: procs.workers.reduce((sum, w) => sum + (cpuSeconds(w.pid) ?? Number.NaN), 0),
    });
    const cpuBefore = cpu();
    const sent = await submit(procs.base, headers, installs, n, arrival);
    const answered = Math.max(...sent.samples.map((s) => s.answeredMs));
    const jobs = setup.serve || setup.workers > 0;
    const ended = jobs ? await collect(procs.base, headers, sent.samples) : new Map<string, Operation>();
    const cpuAfter = cpu();
    const done = sent.samples.flatMap((s) => {
      const op = ended.get(s.opId);
      if (!op?.started_at || !op.completed_at) return [];
      return [{ ...s, started: Date.parse(op.started_at), completed: Date.parse(op.completed_at), op }];
    });
    const lastCompleted = Math.max(...done.map((d) => d.completed));
    const wallSeconds = ((jobs ? lastCompleted : answered) - sent.began) / 1000;
    const result = {
      database: target.version,
      setup: setup.serve
        ? 'hostplane serve (in-process worker)'
        : setup.workers === 0
          ? 'hostplane api, no worker (baseline)'
          : `hostplane api + ${setup.workers} hostplane worker`,
      workers: setup.workers,
      backup_seconds: setup.backupSeconds,
      arrival:
        arrival.kind === 'burst' ? `burst, ${arrival.clients} clients` : `${arrival.perSecond.toFixed(1)}/s`,
      requests: n,
      accepted: sent.samples.length,
      request_errors: sent.errors,
      max_in_flight: sent.maxInFlight,
      requests_per_second: sent.samples.length / ((answered - sent.began) / 1000),
      response_ms: stats(sent.samples.map((s) => s.answeredMs - s.sentMs)),
      wall_seconds: wallSeconds,
      ...(jobs && {
        completed: done.filter((d) => d.op.status === 'completed').length,
        failed: done.filter((d) => d.op.status === 'failed').length,
        unfinished: sent.samples.length - done.length,
        backups_per_second: done.length / wallSeconds,
        request_to_start_ms: stats(done.map((d) => d.started - d.sentMs)),
        response_to_start_ms: stats(done.map((d) => d.started - d.answeredMs)),
        request_to_complete_ms: stats(done.map((d) => d.completed - d.sentMs)),
      }),
      cpu_ms_per_backup: {
        api: ((cpuAfter.api - cpuBefore.api) * 1000) / n,
        workers: ((cpuAfter.workers - cpuBefore.workers) * 1000) / n,
      },
      log_problems: procs.logProblems().length,
      log_sample: procs.logProblems().slice(0, 3),
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await procs.stop();
  }
}

type Result = Awaited<ReturnType<typeof measure>>;

/** Every run of one database: bursts, then half their throughput as a steady rate. */
async function runsOn(kind: DbKind, results: Result[]) {
  const target = await prepareTarget(kind, fs.mkdtempSync(path.join(os.tmpdir(), 'hp-bench-jobs-')));
  try {
    const fixture = await seed(target);
    const burst: Arrival = { kind: 'burst', clients: CLIENTS };
    const both = async (setup: Setup) => {
      const first = await measure(target, fixture, setup, burst, N);
      results.push(first);
      const perSecond = (first.backups_per_second ?? 0) / 2;
      if (!(perSecond > 0)) return;
      const n = Math.min(N, Math.ceil(perSecond * STEADY_SECONDS));
      results.push(await measure(target, fixture, setup, { kind: 'steady', perSecond }, n));
    };
    if (kind === 'pglite') return await both({ db: kind, workers: 0, serve: true, backupSeconds: 0 });
    results.push(
      await measure(target, fixture, { db: kind, workers: 0, serve: false, backupSeconds: 0 }, burst, N),
    );
    for (const workers of [1, 2, 4]) await both({ db: kind, workers, serve: false, backupSeconds: 0 });
    const slow = { db: kind, workers: 1, serve: false, backupSeconds: SLOW_BACKUP_SECONDS };
    results.push(await measure(target, fixture, slow, burst, N));
  } finally {
    await target.drop();
  }
}

const ms = (s: { p50: number; p90: number; p99: number; max: number } | undefined) =>
  s ? `${s.p50} / ${s.p90} / ${s.p99} / ${s.max}` : 'n/a';
const fixed = (v: number | undefined, digits = 1) => (v === undefined ? 'n/a' : v.toFixed(digits));

function errorsOf(r: Result): string {
  const http = Object.entries(r.request_errors).map(([what, count]) => `${count} ${what}`);
  const jobs = [r.failed && `${r.failed} failed`, r.unfinished && `${r.unfinished} unfinished`];
  return [...http, ...jobs.filter(Boolean)].join(', ') || '0';
}

function table(results: Result[]): string[] {
  return [
    '| database | processes | backup s | arrival | backups | wall s | backups/s | request-to-start ms p50 / p90 / p99 / max | 202-to-start p50 / p99 | request-to-complete p50 / p99 | createBackup req/s | response p50 / p99 ms | errors | CPU ms/backup API / workers | log warnings |',
    '|---|---|---:|---|---:|---:|---:|---|---|---|---:|---|---|---|---:|',
    ...results.map((r) =>
      [
        '',
        r.database.replace(/ \(.*\)$/, ''),
        r.setup,
        r.backup_seconds,
        r.arrival,
        r.accepted,
        fixed(r.wall_seconds),
        fixed(r.backups_per_second),
        ms(r.request_to_start_ms),
        r.response_to_start_ms ? `${r.response_to_start_ms.p50} / ${r.response_to_start_ms.p99}` : 'n/a',
        r.request_to_complete_ms
          ? `${r.request_to_complete_ms.p50} / ${r.request_to_complete_ms.p99}`
          : 'n/a',
        fixed(r.requests_per_second),
        `${r.response_ms.p50} / ${r.response_ms.p99}`,
        errorsOf(r),
        `${fixed(r.cpu_ms_per_backup.api, 2)} / ${fixed(r.cpu_ms_per_backup.workers, 2)}`,
        r.log_problems,
        '',
      ]
        .join(' | ')
        .trim(),
    ),
  ];
}

async function main() {
  assertBuilt();
  const only = process.argv[2] as DbKind | undefined;
  const before = uptime();
  const results: Result[] = [];
  for (const kind of ['postgres', 'pglite'] as const) if (!only || only === kind) await runsOn(kind, results);
  const after = uptime();
  const lines = [
    '# Jobs: createBackup throughput and request-to-start latency',
    '',
    `\`npm run bench:jobs${only ? ` -- ${only}` : ''}\`, BENCH_JOBS=${N}, ${CLIENTS} clients per burst, Node ${process.version}, ${new Date().toISOString()}`,
    '',
    `uptime before: \`${before}\` · after: \`${after}\``,
    '',
    ...table(results),
    '',
    "request-to-start: the operation's started_at (set by the worker when the job begins) minus the moment",
    'the client sent the request; 202-to-start: minus the moment its 202 arrived (negative: the job began',
    'first). wall s: first request sent to the last completed_at; backups/s: finished backups / wall s.',
    'Steady runs send at half the burst throughput of the same setup. CPU: user + system time of the',
    'processes during the run (idle loops included), per backup. See bench/jobs.README.md.',
    '',
  ];
  fs.mkdirSync(OUT, { recursive: true });
  fs.writeFileSync(new URL('jobs.md', OUT), lines.join('\n'));
  fs.writeFileSync(
    new URL('jobs.json', OUT),
    `${JSON.stringify({ jobs: N, clients: CLIENTS, uptime: { before, after }, results }, null, 2)}\n`,
  );
  console.log(lines.join('\n'));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
