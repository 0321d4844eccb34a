import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  id: string;
  timestamp: string;
  signatures: string[];
  body: string;
  /** The attempt number of this webhook-id at the receiver (1 on the first). */
  attempt: number;
  /** What the receiver answered. */
  status: number;
  /** Wall time it arrived (benchmarks). */
  at: number;
}

export interface ReceiverOptions {
  /** Attempts of each webhook-id answered 500 before a 200 (default 0). */
  failFirst?: number;
  /** Answer every request with this status (an endpoint that keeps failing). */
  alwaysStatus?: number;
  /** Hold the response of the first request of each id until `release()` (a worker killed mid-delivery). */
  hang?: boolean;
}

/**
 * A local webhook receiver for the tests: records every request, answers as told, and keeps the
 * accepted events once per `webhook-id` (the dedupe a real receiver does).
 */
export async function startReceiver(options: ReceiverOptions = {}) {
  const requests: Received[] = [];
  const accepted = new Map<string, Received>();
  const attempts = new Map<string, number>();
  const hung: http.ServerResponse[] = [];
  let hangNext = options.hang ?? false;
  const waiters: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = String(req.headers['webhook-id'] ?? '');
      const attempt = (attempts.get(id) ?? 0) + 1;
      attempts.set(id, attempt);
      const status = options.alwaysStatus ?? (attempt <= (options.failFirst ?? 0) ? 500 : 200);
      const r: Received = {
        id,
        timestamp: String(req.headers['webhook-timestamp'] ?? ''),
        signatures: String(req.headers['webhook-signature'] ?? '')
          .split(' ')
          .filter(Boolean),
        body: Buffer.concat(chunks).toString('utf8'),
        attempt,
        status,
        at: performance.now(),
      };
      requests.push(r);
      for (const w of waiters.splice(0)) w();
      if (hangNext) {
        hangNext = false;
        hung.push(res);
        return;
      }
      if (status === 200 && !accepted.has(id)) accepted.set(id, r);
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'x'.repeat(4000));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    accepted,
    /** Resolves at the next request. */
    next: () => new Promise<void>((resolve) => waiters.push(resolve)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hung) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Whether `r` carries a valid Standard Webhooks signature of `secret` (standardwebhooks verify). */
export function verifies(
  secret: string,
  r: Pick<Received, 'id' | 'timestamp' | 'signatures' | 'body'>,
): boolean {
  try {
    new Webhook(secret).verify(r.body, {
      'webhook-id': r.id,
      'webhook-timestamp': r.timestamp,
      'webhook-signature': r.signatures.join(' '),
    });
    return true;
  } catch {
    return false;
  }
}
