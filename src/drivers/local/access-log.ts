import fs from 'node:fs/promises';
import path from 'node:path';
import type { TrafficDay } from '../driver.js';
import * as files from './files.js';

/**
 * Usage from the server (issue 21): each install's nginx access log (format `hostplane_usage` of
 * webserver.ts: time, status, bytes, cache status, client address, tab-separated) rolled into daily
 * figures. A state file beside the log keeps where the last roll-up stopped (the log's inode and a
 * byte offset) and each recent day's running totals with its set of client addresses (visits are
 * distinct addresses a day). The figures handed on are a day's absolute totals, so storing them is
 * idempotent: the state is written only after they are stored, and a crash in between reads the
 * same lines again to the same totals. A log that was rotated (another inode; the rest of the old
 * one read from `<log>.1` when it is there) or truncated (smaller than the offset) is read from its
 * start (a truncation is seen by the size, or by other first bytes than at the last read). Only whole lines are read; a line being written is left for the next roll-up.
 */

interface DayState {
  ips: string[];
  requests: number;
  origin_requests: number;
  origin_bytes: number;
  total_bytes: number;
}

interface LogState {
  inode: number;
  offset: number;
  /** The log's first bytes when it was last read: other bytes there mean it was truncated and rewritten. */
  head?: string;
  days: Record<string, DayState>;
}

/** Days a state keeps (a line of a day older than this starts it anew, as a late line would). */
const KEEP_DAYS = 3;
/** Bytes read from one log in one roll-up (the rest waits for the next). */
const MAX_READ = 64 * 1024 * 1024;
/** How much of a log's start identifies it (its first line's time and status). */
const HEAD_BYTES = 32;
/** Served from the page cache: not an origin request. */
const FROM_CACHE = new Set(['HIT', 'STALE', 'UPDATING', 'REVALIDATED']);

const empty = (): DayState => ({ ips: [], requests: 0, origin_requests: 0, origin_bytes: 0, total_bytes: 0 });

/** One log line's figures, or null for a line that is not of the format. */
export function parseLine(line: string) {
  const parts = line.split('\t');
  if (parts.length !== 5) return null;
  const [msec, status, bytes, cache, ip] = parts as [string, string, string, string, string];
  const time = Number(msec);
  const sent = Number(bytes);
  if (!Number.isFinite(time) || !/^\d{3}$/.test(status) || !Number.isInteger(sent) || ip === '') return null;
  return {
    date: new Date(Math.floor(time * 1000)).toISOString().slice(0, 10),
    bytes: sent,
    cached: FROM_CACHE.has(cache),
    ip,
  };
}

async function readState(file: string): Promise<LogState> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as LogState;
  } catch {
    return { inode: 0, offset: 0, days: {} };
  }
}

/** Whole lines of `file` from `offset` (at most MAX_READ bytes), and the offset after the last one. */
async function readLines(file: string, offset: number): Promise<{ lines: string[]; next: number }> {
  const handle = await fs.open(file, 'r');
  try {
    const size = (await handle.stat()).size;
    const length = Math.min(size - offset, MAX_READ);
    if (length <= 0) return { lines: [], next: offset };
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, offset);
    const end = buffer.subarray(0, bytesRead).lastIndexOf(0x0a);
    if (end < 0) return { lines: [], next: offset };
    return {
      lines: buffer.subarray(0, end).toString('utf8').split('\n'),
      next: offset + end + 1,
    };
  } finally {
    await handle.close();
  }
}

/** The log's first bytes, at most up to `offset` (a line starts with its time in milliseconds). */
async function headOf(file: string, offset: number): Promise<string> {
  const length = Math.min(HEAD_BYTES, offset);
  if (length === 0) return '';
  const handle = await fs.open(file, 'r');
  try {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, 0);
    return buffer.subarray(0, bytesRead).toString('base64');
  } finally {
    await handle.close();
  }
}

function add(state: LogState, lines: string[]) {
  const touched = new Set<string>();
  const sets = new Map<string, Set<string>>();
  for (const line of lines) {
    const hit = parseLine(line);
    if (!hit) continue;
    let day = state.days[hit.date];
    if (!day) {
      day = empty();
      state.days[hit.date] = day;
    }
    let ips = sets.get(hit.date);
    if (!ips) {
      ips = new Set(day.ips);
      sets.set(hit.date, ips);
    }
    ips.add(hit.ip);
    day.requests++;
    day.total_bytes += hit.bytes;
    if (!hit.cached) {
      day.origin_requests++;
      day.origin_bytes += hit.bytes;
    }
    touched.add(hit.date);
  }
  for (const [date, ips] of sets) (state.days[date] as DayState).ips = [...ips];
  return touched;
}

/**
 * Rolls the new lines of one install's access log: `store` gets the absolute totals of every day the
 * new lines touched, then the state moves past them. Answers the days stored.
 */
export async function rollLog(
  log: string,
  store: (days: TrafficDay[]) => Promise<void>,
  today: string,
): Promise<TrafficDay[]> {
  const stateFile = `${log}.usage.json`;
  const state = await readState(stateFile);
  const touched = new Set<string>();
  let stat: Awaited<ReturnType<typeof fs.stat>> | null = null;
  try {
    stat = await fs.stat(log);
  } catch {
    stat = null;
  }
  if (stat && stat.ino !== state.inode) {
    // Rotated: the rest of the old log first (it is `<log>.1` now), then the new one from its start.
    const old = `${log}.1`;
    if (state.inode !== 0 && (await files.exists(old)) && (await fs.stat(old)).ino === state.inode) {
      const rest = await readLines(old, state.offset);
      for (const d of add(state, rest.lines)) touched.add(d);
    }
    state.inode = stat.ino;
    state.offset = 0;
  } else if (stat && (stat.size < state.offset || (await headOf(log, state.offset)) !== (state.head ?? ''))) {
    state.offset = 0; // Truncated (and maybe written past the old offset since).
  }
  if (stat) {
    const read = await readLines(log, state.offset);
    for (const d of add(state, read.lines)) touched.add(d);
    state.offset = read.next;
    state.head = await headOf(log, state.offset);
  }
  const days = [...touched].sort().map((date) => {
    const d = state.days[date] as DayState;
    return {
      date,
      visits: d.ips.length,
      requests: d.requests,
      origin_requests: d.origin_requests,
      origin_bytes: d.origin_bytes,
      total_bytes: d.total_bytes,
    };
  });
  if (days.length > 0) await store(days);
  const oldest = new Date(Date.parse(today) - KEEP_DAYS * 86_400_000).toISOString().slice(0, 10);
  for (const date of Object.keys(state.days)) if (date < oldest) delete state.days[date];
  const temp = path.join(path.dirname(stateFile), `.${path.basename(stateFile)}.tmp`);
  await fs.writeFile(temp, JSON.stringify(state), { mode: 0o600 });
  await fs.rename(temp, stateFile);
  return days;
}
