import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import pino from 'pino';
import { requestLoggerFactory } from './request-logger.js';

function memoryLogger(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      callback();
    },
  });
  const logger = pino({ level, redact: { paths: ['*.password'], remove: true } }, stream);
  // Counts the children made of the app's logger (one per request before decision 219).
  const counts = { children: 0 };
  const child = logger.child;
  // pino's children inherit this property: count the requests' (a reqId binding), keep each one's `this`.
  logger.child = function (this: typeof logger, ...args: Parameters<typeof child>) {
    if ('reqId' in (args[0] ?? {})) counts.children++;
    return child.apply(this, args);
  } as typeof logger.child;
  return { logger, lines, counts };
}

async function appWith(level: string) {
  const { logger, lines, counts } = memoryLogger(level);
  const app = Fastify({ loggerInstance: logger, childLoggerFactory: requestLoggerFactory });
  app.get('/ok', async () => ({ ok: true }));
  app.get('/warn', async (request) => {
    request.log.warn({ user: { name: 'u', password: 'secret' } }, 'careful');
    return { ok: true };
  });
  app.get('/boom', async () => {
    throw new Error('boom');
  });
  app.get('/child', async (request) => {
    const child = request.log.child({ part: 'x' });
    child.error('from a child');
    return { level: request.log.level, childLevel: child.level };
  });
  await app.ready();
  counts.children = 0;
  return { app, lines, counts };
}

describe('request loggers (issue 29, decision 219)', () => {
  it('issue 29: above info, a request that writes nothing makes no child; a line it writes carries reqId and redaction', async () => {
    const { app, lines, counts } = await appWith('warn');
    const ok = await app.inject({ url: '/ok', headers: { 'x-request-id': 'a' } });
    assert.equal(ok.statusCode, 200);
    assert.equal(lines.length, 0);
    assert.equal(counts.children, 0);
    await app.inject({ url: '/warn' });
    const [warned] = lines;
    assert.equal(warned?.msg, 'careful');
    assert.equal(typeof warned?.reqId, 'string');
    assert.deepEqual(warned?.user, { name: 'u' });
    await app.inject({ url: '/boom' });
    const errors = lines.filter((line) => (line.level as number) >= 50);
    assert.equal(errors.length, 1);
    assert.equal(typeof errors[0]?.reqId, 'string');
    assert.notEqual(errors[0]?.reqId, warned?.reqId);
    await app.close();
  });

  it('issue 29: at info, every request still logs its lines with its reqId (pino child as before)', async () => {
    const { app, lines, counts } = await appWith('info');
    await app.inject({ url: '/ok' });
    assert.equal(counts.children, 1);
    await new Promise((resolve) => setImmediate(resolve));
    const messages = lines.map((line) => line.msg);
    assert.deepEqual(messages, ['incoming request', 'request completed']);
    assert.equal(lines[0]?.reqId, lines[1]?.reqId);
    await app.close();
  });

  it('issue 29: a request logger answers level and child() as pino does (silent: nothing; error: the child line with both bindings)', async () => {
    const silent = await appWith('silent');
    const quiet = await silent.app.inject({ url: '/child' });
    assert.deepEqual(quiet.json(), { level: 'silent', childLevel: 'silent' });
    assert.equal(silent.lines.length, 0);
    await silent.app.close();
    const errorsOnly = await appWith('error');
    const res = await errorsOnly.app.inject({ url: '/child', headers: { 'x-request-id': 'c-1' } });
    assert.deepEqual(res.json(), { level: 'error', childLevel: 'error' });
    assert.equal(errorsOnly.lines.length, 1);
    assert.equal(errorsOnly.lines[0]?.msg, 'from a child');
    assert.equal(errorsOnly.lines[0]?.part, 'x');
    assert.equal(typeof errorsOnly.lines[0]?.reqId, 'string');
    await errorsOnly.app.close();
  });
});
