import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { type AddressLookup, resolveTarget, type TargetPolicy, TargetRefused } from './url-guard.js';

/** At most this much of a response is read and kept (the delivery log's excerpt). */
export const RESPONSE_EXCERPT_BYTES = 1024;

export interface AttemptResult {
  /** The HTTP status, or null when no response came (refused, DNS, connect, timeout). */
  status: number | null;
  latencyMs: number;
  /** Up to 1 KB of the response body (UTF-8, lossy). */
  excerpt: string | null;
  error: string | null;
  /** Why no response came (null when one did: a non-2xx status is judged by the caller). */
  errorKind: 'refused' | 'dns' | 'connection' | 'timeout' | null;
}

export interface SendOptions {
  timeoutMs: number;
  /** WEBHOOK_ALLOWED_NETWORKS: what besides public addresses may be reached. */
  policy: TargetPolicy;
  /** How the URL's host name is resolved (DNS_SERVERS when set). */
  lookup: AddressLookup;
}

/**
 * One POST of a signed delivery. The host is resolved and checked here (url-guard.ts), and the
 * socket connects to that checked address (a `lookup` that answers it), so a DNS answer that changes
 * between the check and the connect is never used. Redirects are not followed (a 3xx is a failure);
 * at most 1 KB of the response is read; the whole attempt is bounded by `timeoutMs`.
 */
export async function postWebhook(
  rawUrl: string,
  headers: Record<string, string>,
  body: string,
  { timeoutMs, policy, lookup }: SendOptions,
): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const url = new URL(rawUrl);
  let target: Awaited<ReturnType<typeof resolveTarget>>;
  try {
    target = await resolveTarget(url.hostname, policy, lookup);
  } catch (err) {
    const refused = err instanceof TargetRefused;
    const message = refused ? `refused: ${err.message}` : (err as Error).message;
    return {
      status: null,
      latencyMs: elapsed(),
      excerpt: null,
      error: message,
      errorKind: refused && err.reason === 'address' ? 'refused' : 'dns',
    };
  }
  const pinned: LookupFunction = (_host, options, callback) => {
    if ((options as { all?: boolean }).all)
      (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    else callback(null, target.address, target.family);
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (r: Omit<AttemptResult, 'latencyMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ ...r, latencyMs: elapsed() });
    };
    const req = client.request(
      url,
      {
        method: 'POST',
        lookup: pinned,
        agent: false,
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'Hostplane-Webhooks/1',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () =>
          finish({
            status: res.statusCode ?? null,
            excerpt: Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString('utf8'),
            error: null,
            errorKind: null,
          });
        res.on('data', (chunk: Buffer) => {
          if (size >= RESPONSE_EXCERPT_BYTES) return;
          chunks.push(chunk);
          size += chunk.length;
          if (size >= RESPONSE_EXCERPT_BYTES) done();
        });
        res.on('end', done);
        res.on('error', done);
      },
    );
    const timer = setTimeout(
      () =>
        finish({
          status: null,
          excerpt: null,
          error: `timed out after ${timeoutMs} ms`,
          errorKind: 'timeout',
        }),
      timeoutMs,
    );
    req.on('error', (err) =>
      finish({ status: null, excerpt: null, error: err.message, errorKind: 'connection' }),
    );
    req.end(body);
  });
}
