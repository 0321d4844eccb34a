import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import type { factories } from './factories.js';
import type { Client, Json, Res, TestApp } from './harness.js';

/** A world whose install is provisioned (active): the start of most job tests. */
export async function readyWorld(
  t: TestApp,
  f: ReturnType<typeof factories>,
  overrides: Record<string, unknown> = {},
) {
  const w = await f.world(overrides);
  await t.runJobs();
  return w;
}

/** A second provisioned install on the world's site. */
export async function readyInstall(
  t: TestApp,
  f: ReturnType<typeof factories>,
  w: Awaited<ReturnType<ReturnType<typeof factories>['world']>>,
  environment = 'staging',
) {
  const install = await f.install(w.owner.client, w.account.id, w.site.id, environment);
  await t.runJobs();
  return install;
}

/** The path of the operation a 202 points at (its Location header), checked to be absolute. */
export function operationPath(res: Res): string {
  const location = res.headers.location;
  assert.equal(typeof location, 'string', `no Location header on ${res.status} ${JSON.stringify(res.body)}`);
  const url = new URL(String(location));
  assert.match(url.pathname, /^\/v1\/operations\/[0-9a-f-]{36}$/);
  return url.pathname;
}

export async function operationOf(client: Client, res: Res): Promise<Json> {
  const op = await client.get(operationPath(res));
  assert.equal(op.status, 200, JSON.stringify(op.body));
  return op.body;
}

/** The outbox as GET /admin/v1/mail lists it (newest first), optionally for one operation. */
export async function mailOf(t: TestApp, operationId?: string): Promise<Json[]> {
  const res = await t.admin.get('/admin/v1/mail?limit=100');
  assert.equal(res.status, 200);
  return res.body.results.filter((m: Json) => !operationId || m.operation_id === operationId);
}

export interface CapturedMail {
  from: string;
  to: string[];
  raw: string;
}

/**
 * A real SMTP server on a local port (smtp-server) that keeps what it receives. `refuseNext(n)`
 * makes it answer the next n messages with a temporary failure (451). Two ways to open SMTP's
 * at-least-once window (issue 20 defect 5), where the server has taken a message but the client never
 * reads the 250 that says so: `loseReplyNext(n)` keeps the next n messages and answers each with a
 * 451 (what a client whose reply was lost concludes); `holdReplyTo(address)` keeps the next message to
 * that address and holds its 250 until `releaseReplies()` (a test kills the sending worker
 * meanwhile). `held` lists the messages taken whose reply is still held.
 */
export async function smtpCapture() {
  const received: CapturedMail[] = [];
  const held: CapturedMail[] = [];
  let refusals = 0;
  let lostReplies = 0;
  let holdFor: string | null = null;
  let pending: (() => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (refusals > 0) {
          refusals--;
          const err = Object.assign(new Error('try again later'), { responseCode: 451 });
          callback(err);
          return;
        }
        const mail = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        };
        received.push(mail);
        if (lostReplies > 0) {
          lostReplies--;
          callback(Object.assign(new Error('reply lost (the message was taken)'), { responseCode: 451 }));
          return;
        }
        if (holdFor && mail.to.includes(holdFor)) {
          holdFor = null;
          held.push(mail);
          pending.push(() => callback());
          return;
        }
        callback();
      });
    },
  });
  // A client that resets its connection (a worker killed mid-session, as the reliability trials do)
  // makes smtp-server emit 'error'; unheard, that event would be an uncaught exception in the test.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    refuseNext(n: number) {
      refusals = n;
    },
    loseReplyNext(n: number) {
      lostReplies = n;
    },
    held,
    /** Holds the 250 of the next message to `address` until `releaseReplies()`. */
    holdReplyTo(address: string) {
      holdFor = address;
    },
    /** Sends the held 250s (to a connection that may be gone by now). */
    releaseReplies() {
      holdFor = null;
      held.length = 0;
      const replies = pending;
      pending = [];
      for (const reply of replies) reply();
    },
    close: () =>
      new Promise<void>((resolve) => {
        holdFor = null;
        for (const reply of pending.splice(0)) reply();
        server.close(() => resolve());
      }),
  };
}

/** A header of a raw message (case-insensitive: nodemailer rewrites some names). */
export function header(raw: string, name: string): string | null {
  const head = raw.split(/\r?\n\r?\n/)[0] ?? '';
  const unfolded = head.replace(/\r?\n[ \t]+/g, ' ');
  const match = new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(unfolded);
  return match?.[1]?.trim() ?? null;
}
