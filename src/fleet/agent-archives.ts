import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { HostingDriver, InstallRef, Snapshot } from '../drivers/driver.js';

/** The size of each part of an upload (the control plane's ARCHIVE_PART_BYTES is the most it takes). */
export const PART_BYTES = 8 * 1024 * 1024;
const ATTEMPTS = 6;

export interface ArchiveLink {
  controlPlaneUrl: string;
  credential: () => string | null;
  signal: AbortSignal;
  log: (message: string) => void;
  /** The credential was refused: the agent stops. */
  refused: (route: string) => Error;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

/** One request of the archive protocol, tried again (back-off, Retry-After) on a network error, 429 or 5xx. */
async function send(link: ArchiveLink, method: string, route: string, body: Buffer | string, type: string) {
  let last: Error = new Error('not sent');
  for (let attempt = 0; attempt < ATTEMPTS && !link.signal.aborted; attempt++) {
    let wait = Math.min(500 * 2 ** attempt, 10_000);
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${link.controlPlaneUrl}${route}`, {
        method,
        headers: { authorization: `Bearer ${link.credential() ?? ''}`, 'content-type': type },
        body,
        signal: AbortSignal.any([link.signal, AbortSignal.timeout(120_000)]),
      });
      text = await res.text();
    } catch (err) {
      if (link.signal.aborted) throw err;
      last = err as Error;
      link.log(`${route} failed, trying again: ${last.message}`);
      await sleep(wait, link.signal);
      continue;
    }
    if (res.status === 401) throw link.refused(route);
    if (res.ok) return JSON.parse(text) as Record<string, unknown>;
    last = new Error(`${route}: ${res.status} ${text.slice(0, 300)}`);
    if (res.status !== 429 && res.status < 500) throw last;
    wait = Math.max(wait, Number(res.headers.get('retry-after') ?? 0) * 1000);
    link.log(`${route} failed, trying again: ${last.message}`);
    await sleep(wait, link.signal);
  }
  throw last;
}

/**
 * Issue 30 (decision #195): after a backup call asked with `upload_archive`, its archive (the driver's
 * exportArchive: the three artefacts, each checked against its checksum as it is read) goes to the
 * control plane in parts of PART_BYTES, hashed as it goes (one part in memory at a time); the
 * snapshot answered names it (`archive`: the call's id, SHA-256, length).
 */
export async function uploadArchive(
  link: ArchiveLink,
  driver: HostingDriver,
  callId: string,
  install: InstallRef,
  snapshot: Snapshot,
): Promise<Snapshot> {
  const file = await driver.exportArchive({
    install,
    backup: { id: callId, description: '', completed_at: new Date(), snapshot },
  });
  const hash = createHash('sha256');
  const route = `/agent/v1/calls/${callId}/archive`;
  let offset = 0;
  let part: Buffer[] = [];
  let partBytes = 0;
  const flush = async () => {
    const body = Buffer.concat(part, partBytes);
    await send(link, 'PUT', `${route}?offset=${offset}`, body, 'application/octet-stream');
    offset += partBytes;
    part = [];
    partBytes = 0;
  };
  try {
    for await (const chunk of file.body) {
      const buf = chunk as Buffer;
      hash.update(buf);
      part.push(buf);
      partBytes += buf.length;
      if (partBytes >= PART_BYTES) await flush();
    }
    if (partBytes > 0 || offset === 0) await flush();
  } finally {
    file.body.destroy();
  }
  const sha256 = hash.digest('hex');
  const done = await send(
    link,
    'POST',
    `${route}/complete`,
    JSON.stringify({ bytes: offset, sha256 }),
    'application/json',
  );
  if (done.sha256 !== sha256 || done.bytes !== offset)
    throw new Error(`the control plane recorded the archive as ${String(done.bytes)} bytes, not ${offset}`);
  return { ...snapshot, archive: { id: callId, sha256, bytes: offset } };
}

/**
 * Issue 30: the archive a copy or restore call `callId` is made from, as a stream (the driver's
 * importBackup reads it as it arrives and checks it).
 */
export async function downloadArchive(link: ArchiveLink, callId: string): Promise<Readable> {
  const route = `/agent/v1/calls/${callId}/archive`;
  const res = await fetch(`${link.controlPlaneUrl}${route}`, {
    headers: { authorization: `Bearer ${link.credential() ?? ''}` },
    signal: link.signal,
  });
  if (res.status === 401) throw link.refused(route);
  if (!res.ok || !res.body) throw new Error(`${route}: ${res.status} ${(await res.text()).slice(0, 300)}`);
  return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
}

/** The snapshot a copy (`source_snapshot`) or restore (`snapshot`) call's input carries, if any. */
export function snapshotOf(method: string, input: unknown): Snapshot | null {
  const value = input as { source_snapshot?: Snapshot; snapshot?: Snapshot } | null;
  if (method === 'copy') return value?.source_snapshot ?? null;
  if (method === 'restore') return value?.snapshot ?? null;
  return null;
}

/** The input with its snapshot replaced by the one imported here. */
export function withSnapshot(method: string, input: unknown, snapshot: Snapshot): unknown {
  const value = input as Record<string, unknown>;
  return method === 'copy' ? { ...value, source_snapshot: snapshot } : { ...value, snapshot };
}
