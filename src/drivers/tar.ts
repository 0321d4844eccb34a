import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { DriverError } from './driver.js';

/**
 * One file of a tar archive: its bytes, or a stream of exactly `size` bytes (read as the archive is;
 * a stream that gives more or fewer fails the archive: the file changed while it was read).
 */
export interface TarEntry {
  name: string;
  size: number;
  mtime: Date;
  content: Buffer | Readable;
  /** The content's SHA-256 (hex), checked as it passes: a mismatch fails the archive at that file's end. */
  sha256?: string;
}

const BLOCK = 512;
/** The largest size an octal header field of 12 bytes holds; larger ones are written base-256 (GNU). */
const OCTAL_SIZE_MAX = 8 ** 11 - 1;

function field(header: Buffer, offset: number, length: number, value: string) {
  header.write(value, offset, length, 'ascii');
}

const octal = (value: number, length: number) => `${value.toString(8).padStart(length - 1, '0')}\0`;

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

/** A POSIX ustar header (names up to 100 ASCII characters: all this module writes). */
function header(entry: TarEntry): Buffer {
  if (!/^[\x20-\x7e]{1,100}$/.test(entry.name)) throw new Error(`tar: unsupported file name ${entry.name}`);
  if (!Number.isSafeInteger(entry.size) || entry.size < 0) throw new Error(`tar: bad size of ${entry.name}`);
  const h = Buffer.alloc(BLOCK, 0);
  field(h, 0, 100, entry.name);
  field(h, 100, 8, octal(0o644, 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  if (entry.size <= OCTAL_SIZE_MAX) field(h, 124, 12, octal(entry.size, 12));
  else {
    // GNU base-256: the high bit of the first byte set, the size big-endian in the rest.
    h[124] = 0x80;
    let rest = BigInt(entry.size);
    for (let i = 135; i > 124; i--) {
      h[i] = Number(rest & 0xffn);
      rest >>= 8n;
    }
  }
  field(h, 136, 12, octal(Math.floor(entry.mtime.getTime() / 1000), 12));
  field(h, 148, 8, '        '); // the checksum counts its own field as spaces
  field(h, 156, 1, '0');
  field(h, 257, 6, 'ustar\0');
  field(h, 263, 2, '00');
  field(h, 265, 32, 'hostplane');
  field(h, 297, 32, 'hostplane');
  let sum = 0;
  for (const byte of h) sum += byte;
  field(h, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return h;
}

/** The exact length of {@link tarStream} of these entries (a download's Content-Length). */
export function tarSize(entries: readonly Pick<TarEntry, 'size'>[]): number {
  return entries.reduce((n, e) => n + BLOCK + e.size + padding(e.size), 0) + 2 * BLOCK;
}

/**
 * An uncompressed tar archive of the entries, as a stream (what `tar -xf` reads): each file's bytes
 * pass through as they are read, so memory stays flat whatever the size (issue 28 finding 9b), and
 * are hashed on the way when the entry names a checksum. The entries' streams are destroyed when the archive ends, fails or is abandoned by its reader.
 */
export function tarStream(entries: readonly TarEntry[]): Readable {
  async function* generate() {
    try {
      for (const entry of entries) {
        yield header(entry);
        let sent = 0;
        const hash = entry.sha256 ? createHash('sha256') : null;
        if (Buffer.isBuffer(entry.content)) {
          sent = entry.content.length;
          hash?.update(entry.content);
          yield entry.content;
        } else {
          for await (const chunk of entry.content) {
            sent += (chunk as Buffer).length;
            if (sent > entry.size) break;
            hash?.update(chunk as Buffer);
            yield chunk as Buffer;
          }
        }
        if (sent !== entry.size)
          throw new Error(
            `tar: ${entry.name} changed while it was archived (${sent} of ${entry.size} bytes)`,
          );
        if (hash && hash.digest('hex') !== entry.sha256)
          // Final: reading the same bytes again gives the same sum (a move carrying the backup fails
          // at once, naming it, decision #227).
          throw new DriverError('backup', `tar: ${entry.name} does not match its checksum`, true);
        const pad = padding(entry.size);
        if (pad > 0) yield Buffer.alloc(pad, 0);
      }
      yield Buffer.alloc(2 * BLOCK, 0);
    } finally {
      for (const entry of entries) if (!Buffer.isBuffer(entry.content)) entry.content.destroy();
    }
  }
  return Readable.from(generate(), { objectMode: false, highWaterMark: 64 * 1024 });
}

/** The entries (all in memory: small ones) as a tar stream with its length. */
export function tarOf(entries: readonly { name: string; mtime: Date; content: Buffer }[]) {
  const sized = entries.map((e) => ({ ...e, size: e.content.length }));
  return { body: tarStream(sized), size: tarSize(sized) };
}
