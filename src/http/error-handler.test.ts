import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { errorHandler } from './error-handler.js';

/** A bare app with the one renderer and a route that throws what the database driver would. */
async function answerTo(thrown: unknown, method: 'GET' | 'POST' = 'GET') {
  const app = Fastify({ logger: false });
  app.setErrorHandler(errorHandler);
  app.route({
    method,
    url: '/x',
    handler: async () => {
      throw thrown;
    },
  });
  const res = await app.inject({ method, url: '/x' });
  await app.close();
  return res;
}

/** Errors shaped like node-postgres's (and PGlite's), wrapped by Drizzle as its `cause`. */
const pgError = (code: string) =>
  Object.assign(new Error('Failed query'), { cause: Object.assign(new Error(code), { code }) });

describe('error renderer: database errors', () => {
  it('G11 a deadlock or serialization failure is a 503 with Retry-After (nothing was written; retry), not a 500', async () => {
    for (const code of ['40P01', '40001']) {
      const res = await answerTo(pgError(code));
      assert.equal(res.statusCode, 503, code);
      assert.equal(res.headers['retry-after'], '5');
      assert.match(res.json().message, /retry it/);
    }
  });

  it('G11 decision 246: a lost answer to a commit is a 503 saying the change may have been made, not "retry"', async () => {
    const lost = () =>
      Object.assign(new Error('Failed query'), {
        cause: Object.assign(new Error('Query read timeout'), { commitOutcomeUnknown: true }),
      });
    const res = await answerTo(lost(), 'POST');
    assert.equal(res.statusCode, 503);
    assert.equal(res.headers['retry-after'], '5');
    assert.match(res.json().message, /may have been made/);
    // A read's own bookkeeping (a credential's last use) is not a change the client asked for.
    const read = await answerTo(lost(), 'GET');
    assert.equal(read.statusCode, 503);
    assert.doesNotMatch(read.json().message, /may have been made/);
    const plain = await answerTo(
      Object.assign(new Error('Failed query'), { cause: new Error('Query read timeout') }),
      'POST',
    );
    assert.equal(plain.statusCode, 503);
    assert.doesNotMatch(plain.json().message, /may have been made/);
  });

  it('G8 any other query error stays a bare 500 without details', async () => {
    const res = await answerTo(pgError('42P01'));
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { message: 'Internal Server Error' });
  });
});
