import { Writable } from 'node:stream';
import type { Json } from './harness.js';

/** An in-memory pino destination: pass `stream` as `logStream` to buildTestApp or startApp. */
export function captureLogs() {
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      raw.push(String(chunk));
      callback();
    },
  });
  /** Every line written so far, as text (for "never contains" checks). */
  const text = () => raw.join('');
  /** Every line written so far, parsed. */
  const lines = (): Json[] =>
    text()
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line));
  return {
    stream,
    text,
    lines,
    /** The lines of one request. */
    forRequest: (requestId: string) => lines().filter((line) => line.reqId === requestId),
    clear: () => {
      raw.length = 0;
    },
  };
}

/**
 * Lets pending I/O callbacks run: the "request completed" line is written when the response
 * finishes, which can be just after `inject` resolves.
 */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
