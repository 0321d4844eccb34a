import { createHash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';

/**
 * Issue 30: reads an uncompressed tar as tar.ts writes it (a backup's archive crossing servers),
 * streamed: each wanted regular file is written to `dir` as it arrives (O_EXCL, 0600, never through a
 * link), so memory holds one chunk whatever the size. Only the names in `wanted` are accepted, each
 * once; any other name, type or a second copy fails the read. Answers the SHA-256 of the whole stream
 * and the files written with their sizes.
 */
export async function extractTar(
  body: Readable,
  dir: string,
  wanted: readonly string[],
  signal: AbortSignal,
): Promise<{ sha256: string; bytes: number; files: Record<string, number> }> {
  const BLOCK = 512;
  const hash = createHash('sha256');
  const written: Record<string, number> = {};
  let bytes = 0;
  let pending: Buffer = Buffer.alloc(0);
  /** The file being written: its handle and the bytes it still expects, then the padding to skip. */
  let current: { handle: fs.FileHandle; left: number; pad: number } | null = null;
  let skip = 0;
  let ended = false;

  const parseHeader = (h: Buffer) => {
    if (h.every((b) => b === 0)) return null;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (h[i] ?? 0);
    const stored = Number.parseInt(h.subarray(148, 156).toString('ascii').replace(/\0.*$/, '').trim(), 8);
    if (stored !== sum) throw new Error('tar: a header fails its checksum');
    const name = h.subarray(0, 100).toString('ascii').replace(/\0.*$/s, '');
    const type = String.fromCharCode(h[156] ?? 0);
    let size: number;
    if (((h[124] ?? 0) & 0x80) !== 0) {
      let value = 0n;
      for (let i = 125; i < 136; i++) value = (value << 8n) | BigInt(h[i] ?? 0);
      size = Number(value);
    } else
      size = Number.parseInt(h.subarray(124, 136).toString('ascii').replace(/\0.*$/, '').trim() || '0', 8);
    if (!Number.isSafeInteger(size) || size < 0) throw new Error(`tar: bad size of ${name}`);
    if (type !== '0' && type !== '\0') throw new Error(`tar: ${name} is not a regular file`);
    if (!wanted.includes(name)) throw new Error(`tar: unexpected entry ${JSON.stringify(name)}`);
    if (name in written) throw new Error(`tar: ${name} appears twice`);
    return { name, size };
  };

  const open = async (name: string, size: number) => {
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fsConstants;
    const handle = await fs.open(path.join(dir, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    written[name] = size;
    current = { handle, left: size, pad: (BLOCK - (size % BLOCK)) % BLOCK };
    if (size === 0) await close();
  };
  const close = async () => {
    if (!current) return;
    const { handle, pad } = current;
    current = null;
    skip = pad;
    await handle.close();
  };

  try {
    for await (const chunk of body) {
      if (signal.aborted) throw signal.reason ?? new Error('aborted');
      const buf = chunk as Buffer;
      hash.update(buf);
      bytes += buf.length;
      if (ended) continue;
      pending = pending.length === 0 ? buf : Buffer.concat([pending, buf]);
      for (;;) {
        const file = current as { handle: fs.FileHandle; left: number; pad: number } | null;
        if (file) {
          if (pending.length === 0) break;
          const part = pending.subarray(0, Math.min(file.left, pending.length));
          await file.handle.write(part);
          file.left -= part.length;
          pending = pending.subarray(part.length);
          if (file.left === 0) await close();
          continue;
        }
        if (skip > 0) {
          const n = Math.min(skip, pending.length);
          skip -= n;
          pending = pending.subarray(n);
          if (skip > 0) break;
          continue;
        }
        if (pending.length < BLOCK) break;
        const header = parseHeader(pending.subarray(0, BLOCK));
        pending = pending.subarray(BLOCK);
        if (!header) {
          ended = true;
          break;
        }
        await open(header.name, header.size);
      }
    }
  } finally {
    await (current as { handle: fs.FileHandle } | null)?.handle.close();
  }
  if (!ended) throw new Error('tar: the archive ended early');
  for (const name of wanted) if (!(name in written)) throw new Error(`tar: ${name} is missing`);
  return { sha256: hash.digest('hex'), bytes, files: written };
}
