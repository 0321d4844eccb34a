import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import type { Readable } from 'node:stream';

/**
 * Issue 28 finding 9b: reading a backup's artefacts for a download, streamed (backups.ts
 * exportArchive), opened without following links.
 */

/**
 * Opens a root-owned backup artefact for reading without following a link (O_NOFOLLOW, O_NONBLOCK:
 * a FIFO never blocks) and checks it is a regular file; answers its stream and size.
 */
export async function openBackupFile(file: string): Promise<{ stream: Readable; size: number }> {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fsConstants;
  const handle = await fs.open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`${file} is not a regular file`);
    return { stream: handle.createReadStream({ highWaterMark: 256 * 1024 }), size: stat.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
}
