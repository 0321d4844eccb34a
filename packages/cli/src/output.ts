import type { Writable } from 'node:stream';

export interface Io {
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable & { isTTY?: boolean; columns?: number };
}

type Row = Record<string, unknown>;

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.map(cell).join(',');
  if (typeof value === 'object') {
    const o = value as Row;
    // A reference to another resource ({id, name?}) shows its name or id.
    if (typeof o.name === 'string') return o.name;
    if (typeof o.id === 'string') return o.id;
    return JSON.stringify(value);
  }
  return String(value);
}

/** Aligned columns, a header line first. */
export function table(rows: Row[], columns: string[]): string {
  const cells = rows.map((row) => columns.map((c) => cell(row[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

/** One record as `key  value` lines. */
export function record(row: Row): string {
  const keys = Object.keys(row);
  const width = Math.max(0, ...keys.map((k) => k.length));
  return keys
    .map((k) => {
      const v = row[k];
      const text = v !== null && typeof v === 'object' && !Array.isArray(v) ? JSON.stringify(v) : cell(v);
      return `${k.padEnd(width)}  ${text}`;
    })
    .join('\n');
}

export class Printer {
  constructor(
    private readonly io: Io,
    readonly json: boolean,
  ) {}

  /** A list page: a table for people, the whole envelope for scripts. */
  list(page: { count: number; results: unknown[]; next?: string | null }, columns: string[]) {
    if (this.json) return this.write(JSON.stringify(page, null, 2));
    if (page.results.length === 0) return this.write('(none)');
    this.write(table(page.results as Row[], columns));
    if (page.next) this.note(`${page.results.length} of ${page.count}; more with --offset`);
  }

  one(value: unknown) {
    if (this.json) return this.write(JSON.stringify(value ?? null, null, 2));
    if (
      value === null ||
      value === undefined ||
      (typeof value === 'object' && Object.keys(value).length === 0)
    )
      return this.write('done');
    this.write(typeof value === 'object' ? record(value as Row) : String(value));
  }

  write(text: string) {
    this.io.stdout.write(`${text}\n`);
  }

  /** Information for people, on stderr (never mixed into --json output). */
  note(text: string) {
    this.io.stderr.write(`${text}\n`);
  }
}
