// test-db: postgres (the subject is the HTTP edge of a served process: body limits, slow clients, not the control plane's database: docs/decisions.md #237)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { cloneDatabase, TEST_DB } from '../support/databases.js';
import { ADMIN_TOKEN } from '../support/harness.js';
import { runCli } from '../support/process.js';

/**
 * Issue 20 defects 2 and 7: the HTTP edge as real clients meet it, on a `hostplane serve` child
 * process (a server in the test's own process shares its event loop with the client, which then
 * writes a whole body before the server runs: the early answer that breaks clients never happens).
 * Node's own fetch (undici) with a body over BODY_LIMIT_BYTES, and clients that send their headers or
 * body a byte at a time. The timeouts are short here; the defaults are in the README.
 */
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hostplane-edge-'));
const clone = TEST_DB === 'postgres' ? await cloneDatabase() : null;
await clone?.database.close();
const server = runCli(['serve'], {
  DATA_DIR: tmp,
  PORT: '0',
  HOST: '127.0.0.1',
  HOSTPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
  HTTP_HEADERS_TIMEOUT_MS: '1000',
  HTTP_REQUEST_TIMEOUT_MS: '3000',
  HTTP_DRAIN_TIMEOUT_MS: '2500',
  ...(clone?.url && { DATABASE_URL: clone.url }),
});
after(async () => {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  await server.exited;
  await clone?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});
const [, user, password, demoUrl] = await server.waitFor(/curl -u '([^:]+):([^']+)' '([^']+)'/);
const authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const accountId = new URL(demoUrl ?? '').searchParams.get('account_id');
const base = new URL(demoUrl ?? '').origin;
const port = Number(new URL(base).port);
const TOO_LARGE = '413 {"message":"Request body is larger than the limit of 1048576 bytes"}';
const FIVE_MB = 5 * 1024 * 1024;

/** `status body` of a fetch, or `error CODE` when the client saw a network error instead. */
async function outcome(request: () => Promise<Response>): Promise<string> {
  try {
    const res = await request();
    return `${res.status} ${await res.text()}`;
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return `error ${cause?.code ?? cause?.message ?? String(err)}`;
  }
}

/** How many times each outcome was seen. */
function tally(outcomes: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o] = (counts[o] ?? 0) + 1;
  return counts;
}

/** A JSON body of `bytes` bytes, sent as a chunked stream of 64 KiB pieces. */
function streamedBody(bytes: number): ReadableStream<Uint8Array> {
  const head = Buffer.from(`{"name":"Big","account_id":"${accountId}","padding":"`);
  const chunk = Buffer.alloc(64 * 1024, 'x');
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent === 0) {
        controller.enqueue(new Uint8Array(head));
        sent += head.length;
      } else if (sent < bytes) {
        controller.enqueue(new Uint8Array(chunk));
        sent += chunk.length;
      } else {
        controller.enqueue(new TextEncoder().encode('"}'));
        controller.close();
      }
    },
  });
}

const postSites = (body: string | ReadableStream<Uint8Array>, extra: RequestInit = {}) =>
  fetch(`${base}/v1/sites`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body,
    ...extra,
  });

const listSites = async () => (await fetch(`${base}/v1/sites`, { headers: { authorization } })).status;

interface RawResult {
  /** What the server sent before it closed the connection. */
  received: string;
  /** Bytes this client had written when the server closed it. */
  written: number;
  /** True when the server closed the connection before `deadlineMs`. */
  closed: boolean;
}

/**
 * A raw client: writes `head` at once, then `trickle` one byte every 200 ms, until the server closes
 * the connection (or `deadlineMs` passes: then it gives up and says it was never closed).
 */
function rawClient(head: string, trickle: string, deadlineMs: number): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let written = 0;
    let next = 0;
    const write = (text: string) => {
      if (socket.destroyed || !socket.writable) return;
      written += Buffer.byteLength(text);
      socket.write(text, () => {});
    };
    socket.on('connect', () => write(head));
    const tick = setInterval(() => {
      if (next < trickle.length) write(trickle[next++] ?? '');
    }, 200);
    const finish = (closed: boolean) => {
      clearInterval(tick);
      clearTimeout(deadline);
      socket.destroy();
      resolve({ received, written, closed });
    };
    const deadline = setTimeout(() => finish(false), deadlineMs);
    socket.on('data', (data) => {
      received += data.toString();
    });
    socket.on('error', () => {});
    socket.on('close', () => finish(true));
  });
}

/** The status and JSON body of a raw HTTP/1.1 response. */
function parseRaw(text: string): { status: number; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  try {
    return { status, body: JSON.parse(body) };
  } catch {
    return { status, body };
  }
}

describe('the HTTP edge with real clients (issue 20)', () => {
  it('issue 20 defect 2: Node fetch with a 5 MB body (Content-Length, 20 tries) gets the 413 JSON every time, never a network error', async () => {
    const big = JSON.stringify({ name: 'Big', account_id: accountId, padding: 'x'.repeat(FIVE_MB) });
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) outcomes.push(await outcome(() => postSites(big)));
    assert.deepEqual(tally(outcomes), { [TOO_LARGE]: 20 });
    assert.equal(await listSites(), 200, 'a normal request on the same server');
  });

  it('issue 20 defect 2: Node fetch with a streamed (chunked) 5 MB body (20 tries) gets the 413 JSON every time', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      outcomes.push(await outcome(() => postSites(streamedBody(FIVE_MB), { duplex: 'half' } as RequestInit)));
    }
    assert.deepEqual(tally(outcomes), { [TOO_LARGE]: 20 });
    assert.equal(await listSites(), 200, 'a normal request on the same server');
  });

  it('issue 20 defect 2: a body announced past the drain bound (HTTP_DRAIN_MB) is not read: the 413 comes at once and the connection closes', async () => {
    const head =
      'POST /v1/sites HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      `Authorization: ${authorization}\r\nContent-Length: ${2 ** 31}\r\n\r\n{"name":`;
    const result = await rawClient(head, '', 15_000);
    assert.ok(result.closed, 'the server closed the connection');
    const { status, body } = parseRaw(result.received);
    assert.equal(status, 413, result.received);
    assert.deepEqual(body, { message: 'Request body is larger than the limit of 1048576 bytes' });
  });

  it('issue 20 defect 7: clients trickling a body or headers a byte per 200 ms are cut off with a 408 after HTTP_REQUEST_TIMEOUT_MS / HTTP_HEADERS_TIMEOUT_MS, while normal requests are served', async () => {
    const bodyHead =
      'POST /v1/sites HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      `Authorization: ${authorization}\r\nContent-Length: 1000\r\n\r\n`;
    const slowBody = Array.from({ length: 10 }, () => rawClient(bodyHead, ' '.repeat(1000), 20_000));
    const slowHeaders = rawClient('GET /v1/sites HTTP/1.1\r\n', `X-Slow: ${'a'.repeat(1000)}`, 20_000);
    let done = false;
    const all = Promise.all([...slowBody, slowHeaders]).finally(() => {
      done = true;
    });
    const served: number[] = [];
    while (!done) {
      served.push(await listSites());
      await new Promise((r) => setTimeout(r, 100));
    }
    const results = await all;
    for (const result of results) {
      assert.ok(result.closed, `still open after 20 s (${result.written} bytes written)`);
      const { status, body } = parseRaw(result.received);
      assert.equal(status, 408, result.received);
      assert.deepEqual(Object.keys(body as object), ['message']);
      assert.ok(result.written < 1000, `${result.written} bytes written before the cut`);
    }
    assert.ok(served.length > 0);
    assert.deepEqual(new Set(served), new Set([200]), 'every normal request meanwhile was served');
  });
});
