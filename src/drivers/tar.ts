import { gzipSync } from 'node:zlib';

/** One file of a tar archive. */
export interface TarEntry {
  name: string;
  content: Buffer;
  mtime: Date;
}

const BLOCK = 512;

function field(header: Buffer, offset: number, length: number, value: string) {
  header.write(value, offset, length, 'ascii');
}

const octal = (value: number, length: number) => `${value.toString(8).padStart(length - 1, '0')}\0`;

/** A POSIX ustar header (names up to 100 ASCII characters: all this module writes). */
function header(entry: TarEntry): Buffer {
  if (!/^[\x20-\x7e]{1,100}$/.test(entry.name)) throw new Error(`tar: unsupported file name ${entry.name}`);
  const h = Buffer.alloc(BLOCK, 0);
  field(h, 0, 100, entry.name);
  field(h, 100, 8, octal(0o644, 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(entry.content.length, 12));
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

/** A gzip-compressed tar archive of the entries (what `tar -xzf` reads). */
export function tarGz(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    parts.push(header(entry), entry.content);
    const pad = (BLOCK - (entry.content.length % BLOCK)) % BLOCK;
    parts.push(Buffer.alloc(pad, 0));
  }
  parts.push(Buffer.alloc(BLOCK * 2, 0));
  return gzipSync(Buffer.concat(parts));
}
