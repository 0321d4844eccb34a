import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { HttpConfig } from '../config.js';

/**
 * The HTTP server's edge (issue 20): what a slow or oversized request gets, before any route runs.
 *
 * - Timeouts (defect 7): Node's server cuts a request whose headers are not in by
 *   `HTTP_HEADERS_TIMEOUT_MS`, or whose headers and body are not in by `HTTP_REQUEST_TIMEOUT_MS` (a
 *   body trickled a byte at a time is never idle, so only a bound on the whole request ends it). Node
 *   checks them every `connectionsCheckingInterval` (30 s by default, which made a 60 s headers
 *   timeout fire after 83 s): here a quarter of the headers timeout, at most 1 s.
 * - The answer to a cut request (`clientError`): a 408 (431 for headers too large, else 400) with
 *   the API's `{message}` body and `Connection: close`, written only when no response of this request
 *   has started on the socket; the client's later bytes are read and dropped for a moment so the
 *   answer is not lost to a reset.
 * - An oversized body (defect 2): Fastify answers its 413 as soon as the limit is passed, with
 *   `Connection: close`, while the client is still writing; Node then closes the socket, unread bytes
 *   make the kernel reset it, and a client that writes before it reads (Node's fetch) gets EPIPE
 *   instead of the 413. So before such an answer goes out, the rest of the body is read and discarded,
 *   up to `HTTP_DRAIN_MB` and `HTTP_DRAIN_TIMEOUT_MS`; past either (or a Content-Length announcing
 *   more), the answer goes out at once and the connection closes, as before.
 */
export interface HttpEdge {
  /** Spread into the Fastify options: timeouts and the client error answer. */
  serverOptions: {
    requestTimeout: number;
    keepAliveTimeout: number;
    http: http.ServerOptions;
    clientErrorHandler: NonNullable<FastifyServerOptions['clientErrorHandler']>;
  };
  /** Call once on the app, before routes are registered. */
  install(app: FastifyInstance): void;
}

/** How often Node looks for timed-out requests: often enough that a timeout is not overshot by much. */
export function checkingIntervalMs(settings: HttpConfig): number {
  return Math.max(25, Math.min(1000, Math.floor(settings.headersTimeoutMs / 4)));
}

export function httpEdge(settings: HttpConfig): HttpEdge {
  // The last response of each socket: a cut request gets a 408 only if nothing of its own answer was sent.
  const responses = new WeakMap<Socket, ServerResponse>();
  const answered = new WeakSet<Socket>();

  function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket) {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (answered.has(socket)) {
      socket.destroy();
      return;
    }
    answered.add(socket);
    this.log.debug({ err }, 'client error');
    const res = responses.get(socket);
    // A finished response to a request that was read whole belongs to an earlier keep-alive request.
    const responding = res?.headersSent === true && !(res.writableFinished && res.req.complete);
    if (responding || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout: the request did not arrive in time']
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request header fields too large']
          : [400, 'Bad Request: malformed HTTP request'];
    const body = JSON.stringify({ message });
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    socket.resume();
    const linger = setTimeout(() => socket.destroy(), 1000);
    linger.unref();
    socket.once('close', () => clearTimeout(linger));
  }

  const drainLimits = { bytes: settings.drainBytes, ms: settings.drainTimeoutMs };

  return {
    serverOptions: {
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      http: {
        headersTimeout: settings.headersTimeoutMs,
        requestTimeout: settings.requestTimeoutMs,
        keepAliveTimeout: settings.keepAliveTimeoutMs,
        connectionsCheckingInterval: checkingIntervalMs(settings),
      },
      clientErrorHandler: clientErrorHandler as NonNullable<FastifyServerOptions['clientErrorHandler']>,
    },
    install(app) {
      app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
        responses.set(req.socket, res);
      });
      // Fastify marks the answer to a body it refused (too large, unreadable) with `Connection: close`.
      // A callback hook: it runs on every answer, and waits only for a refused body (issue 29).
      app.addHook(
        'onSend',
        (
          request: FastifyRequest,
          reply: FastifyReply,
          payload: unknown,
          done: (err: null, payload: unknown) => void,
        ) => {
          if (reply.getHeader('connection') !== 'close') return done(null, payload);
          void discardBody(request.raw, drainLimits).then(() => done(null, payload));
        },
      );
    },
  };
}

/**
 * Reads and drops the rest of a request body, up to `bytes` more and `ms`; true when it was read to
 * its end (or already was), false when a bound was hit or the client went away.
 */
export function discardBody(req: IncomingMessage, limits: { bytes: number; ms: number }): Promise<boolean> {
  if (req.complete || req.readableEnded) return Promise.resolve(true);
  if (req.destroyed || limits.bytes === 0) return Promise.resolve(false);
  const announced = Number(req.headers['content-length']);
  if (announced > limits.bytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const done = (drained: boolean) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onGone);
      req.off('error', onGone);
      resolve(drained);
    };
    const onData = (chunk: Buffer | string) => {
      seen += chunk.length;
      if (seen > limits.bytes) done(false);
    };
    const onEnd = () => done(true);
    const onGone = () => done(false);
    const timer = setTimeout(onGone, limits.ms);
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onGone);
    req.once('error', onGone);
    req.resume();
  });
}
