import { createHash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import type { Db } from '../../db/client.js';
import type { Snapshot } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import * as repo from './servers.repo.js';

/** The largest part of an archive one request carries (an upload is several, each within the request timeout). */
export const ARCHIVE_PART_BYTES = 16 * 1024 * 1024;

/** What the store records of a complete archive, beside it. */
interface ArchiveMeta {
  call_id: string;
  server_id: string;
  install_id: string;
  bytes: number;
  sha256: string;
}

const SHA256 = /^[0-9a-f]{64}$/;
const UPLOADS = new Set(repo.ARCHIVE_UPLOADS);

/**
 * Issue 30 (decision #195): backups' archives crossing hosting servers through the control plane.
 * The source agent uploads the archive of a backup call it holds (`<call>.part` in parts, then
 * complete: `<call>.tar` and its record); the destination agent downloads it while it holds a copy or
 * restore call whose snapshot names that backup, of the install being copied or moved. Files are the
 * control plane's (DATA_DIR/fleet-archives, 0700/0600); an archive goes once the call it fed settles.
 */
export function createArchiveStore({
  db,
  dir,
  inputOf,
}: {
  db: Db;
  dir: string;
  /** A call's input, unsealed (servers.calls.service.ts). */
  inputOf: (call: repo.CallRow) => unknown;
}) {
  const file = (callId: string, ext: 'part' | 'tar' | 'json') => {
    if (!/^[0-9a-f-]{36}$/.test(callId)) throw Errors.notFound();
    return path.join(dir, `${callId}.${ext}`);
  };
  const ready = async () => {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await fs.chmod(dir, 0o700);
  };

  /** The backup call an agent uploads for: its own, still handed out (404, 403, 409 otherwise). */
  async function uploading(serverId: string, callId: string) {
    const call = await repo.callById(db, callId);
    if (!call) throw Errors.notFound();
    if (call.server_id !== serverId) throw Errors.forbidden();
    if (!UPLOADS.has(call.method) || call.state !== 'queued')
      throw Errors.conflict(`Call ${callId} is not a backup this server is running`);
    return call;
  }

  /** The snapshot whose archive a copy or restore call feeds on, and the install it must be of. */
  function fedBy(call: repo.CallRow): { snapshot: Snapshot | null; installId: string | null } {
    const input = inputOf(call) as {
      source?: { id?: string };
      source_snapshot?: Snapshot;
      install?: { id?: string };
      snapshot?: Snapshot;
    } | null;
    if (call.method === 'copy')
      return { snapshot: input?.source_snapshot ?? null, installId: input?.source?.id ?? null };
    // A move's carried backup (decision #226) is fed like a restore.
    if (call.method === 'restore' || call.method === 'adoptBackup')
      return { snapshot: input?.snapshot ?? null, installId: input?.install?.id ?? null };
    return { snapshot: null, installId: null };
  }

  /** A stored archive streamed and hashed on the way (a mismatch fails the stream: the download ends short). */
  async function streamChecked(id: string, meta: ArchiveMeta) {
    const { O_RDONLY, O_NOFOLLOW } = fsConstants;
    const handle = await fs.open(file(id, 'tar'), O_RDONLY | O_NOFOLLOW);
    const hash = createHash('sha256');
    const checked = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        done(null, chunk);
      },
      flush(done) {
        done(hash.digest('hex') === meta.sha256 ? null : new Error('the stored archive fails its checksum'));
      },
    });
    const stream = handle.createReadStream({ highWaterMark: 256 * 1024 });
    stream.on('error', (err) => checked.destroy(err));
    return { body: stream.pipe(checked), size: meta.bytes, fileName: `${id}.tar` };
  }

  return {
    /** PUT .../archive?offset=N: a part at `offset` (again: rewritten; past the end: 409). Answers the bytes held. */
    async putPart(serverId: string, callId: string, offset: number, body: Buffer) {
      await uploading(serverId, callId);
      await ready();
      const { O_RDWR, O_CREAT, O_NOFOLLOW } = fsConstants;
      const handle = await fs.open(file(callId, 'part'), O_RDWR | O_CREAT | O_NOFOLLOW, 0o600);
      try {
        const { size } = await handle.stat();
        if (offset > size) throw Errors.conflict(`The archive holds ${size} bytes: send the part at ${size}`);
        await handle.truncate(offset);
        await handle.write(body, 0, body.length, offset);
        await handle.sync();
      } finally {
        await handle.close();
      }
      return { bytes: offset + body.length };
    },

    /** POST .../archive/complete: the parts are the whole archive (`bytes`, its `sha256`). */
    async complete(serverId: string, callId: string, bytes: number, sha256: string) {
      const call = await uploading(serverId, callId);
      if (!SHA256.test(sha256)) throw Errors.invalidValue('archive', 'sha256', 'A SHA-256 in hex');
      const part = file(callId, 'part');
      const size = (await fs.stat(part).catch(() => null))?.size ?? null;
      if (size !== bytes) throw Errors.conflict(`The archive holds ${size ?? 0} bytes, not ${bytes}`);
      const meta: ArchiveMeta = {
        call_id: callId,
        server_id: serverId,
        install_id: call.install_id,
        bytes,
        sha256,
      };
      await fs.writeFile(file(callId, 'json'), JSON.stringify(meta), { mode: 0o600 });
      await fs.rename(part, file(callId, 'tar'));
      return { id: callId, bytes, sha256 };
    },

    /**
     * GET /agent/v1/calls/{call}/archive: the archive the agent's copy, restore or adoptBackup call
     * `callId` feeds on, streamed and hashed on the way (a mismatch fails the stream: the download ends short).
     * 403 unless the call is this server's and the archive is of the install it copies or moves.
     */
    async open(serverId: string, callId: string) {
      const call = await repo.callById(db, callId);
      if (!call) throw Errors.notFound();
      if (call.server_id !== serverId) throw Errors.forbidden();
      if (call.state !== 'queued') throw Errors.conflict(`Call ${callId} is not running`);
      const { snapshot, installId } = fedBy(call);
      const archive = snapshot?.archive;
      if (!archive || !installId) throw Errors.notFound();
      const backup = await repo.callById(db, archive.id);
      // Made by a backup call, or by an exportArchive call (a backup a move carries, decision #226).
      if (!UPLOADS.has(backup?.method ?? '') || backup?.state !== 'done' || backup.install_id !== installId)
        throw Errors.forbidden();
      const meta = JSON.parse(
        await fs.readFile(file(archive.id, 'json'), 'utf8').catch(() => 'null'),
      ) as ArchiveMeta | null;
      if (!meta) throw Errors.notFound();
      if (meta.sha256 !== archive.sha256 || meta.bytes !== archive.bytes)
        throw Errors.conflict(`The archive of backup ${archive.id} is not the one its snapshot names`);
      return streamChecked(archive.id, meta);
    },

    /**
     * Issue 30 (decision #225): a backup's archive an agent uploaded for its download (an
     * `exportArchive` call), for the control plane itself; null when it is gone (swept) or is not the
     * one the call's result names.
     */
    async openExport(archive: { id: string; sha256: string; bytes: number }) {
      const meta = JSON.parse(
        await fs.readFile(file(archive.id, 'json'), 'utf8').catch(() => 'null'),
      ) as ArchiveMeta | null;
      if (!meta || meta.sha256 !== archive.sha256 || meta.bytes !== archive.bytes) return null;
      return streamChecked(archive.id, meta).catch(() => null);
    },

    /**
     * The archives of backup calls `ids` go (a move or copy settled before its restore used them:
     * rolled back, cancelled, given up), decision #215.
     */
    async drop(ids: string[]) {
      for (const id of ids)
        if (/^[0-9a-f-]{36}$/.test(id))
          for (const ext of ['part', 'tar', 'json'] as const) await fs.rm(file(id, ext), { force: true });
    },

    /**
     * The crash sweep (decision #215): files of the store older than `maxAgeMs` (by their last
     * write) go, whatever left them (a control plane that died before an operation settled). Answers
     * how many went.
     */
    async sweep(maxAgeMs: number, now = Date.now()) {
      const names = await fs.readdir(dir).catch(() => [] as string[]);
      let removed = 0;
      for (const name of names) {
        if (!/^[0-9a-f-]{36}\.(part|tar|json)$/.test(name)) continue;
        const stat = await fs.lstat(path.join(dir, name)).catch(() => null);
        if (!stat?.isFile() || now - stat.mtimeMs <= maxAgeMs) continue;
        await fs.rm(path.join(dir, name), { force: true });
        removed++;
      }
      return removed;
    },

    /** The archive a settled copy or restore call fed on goes (and a backup's upload left unfinished). */
    async release(call: repo.CallRow) {
      // An upload's call settled: only what it left unfinished; a download's archive stays for the
      // next downloads until the sweep (decision #225).
      const uploads = UPLOADS.has(call.method);
      const ids = [uploads ? call.id : fedBy(call).snapshot?.archive?.id].filter(
        (id): id is string => typeof id === 'string' && /^[0-9a-f-]{36}$/.test(id),
      );
      for (const id of ids)
        for (const ext of uploads ? (['part'] as const) : (['part', 'tar', 'json'] as const))
          await fs.rm(file(id, ext), { force: true });
    },
  };
}

export type ArchiveStore = ReturnType<typeof createArchiveStore>;
