import assert from 'node:assert/strict';
import type { Res } from './harness.js';

const FIELD_ERROR_KEYS = ['code', 'field', 'message', 'resource', 'type'];
const FIELD_ERROR_TYPES = ['invalid_value', 'access_error', 'value_unavailable'];

/**
 * G1/G7/G8: an error response is JSON with exactly the documented keys: `message` (+ optional
 * `documentation_url`), plus `errors[]` of `{resource, field, type, code, message}` for 400 and 422.
 * Never a stack trace, never Fastify's own `{statusCode, error, code}` body.
 */
export function assertErrorBody(res: Res, status: number): void {
  const context = `${res.status} ${res.raw.body}`;
  assert.equal(res.status, status, context);
  assert.match(String(res.headers['content-type']), /^application\/json/, context);
  assert.equal(typeof res.body, 'object', context);
  assert.equal(typeof res.body.message, 'string', context);
  assert.notEqual(res.body.message, '', context);
  const withErrors = status === 400 || status === 422;
  const allowed = withErrors ? ['documentation_url', 'errors', 'message'] : ['documentation_url', 'message'];
  const keys = Object.keys(res.body).sort();
  assert.deepEqual(
    keys.filter((k) => !allowed.includes(k)),
    [],
    `unexpected keys in ${context}`,
  );
  if (withErrors) {
    assert.ok(Array.isArray(res.body.errors), context);
    for (const entry of res.body.errors) {
      assert.deepEqual(Object.keys(entry).sort(), FIELD_ERROR_KEYS, context);
      assert.ok(FIELD_ERROR_TYPES.includes(entry.type), context);
    }
  }
  assert.doesNotMatch(res.raw.body, /\n\s+at |node_modules|\.ts:\d+/, `stack trace in ${context}`);
}

/** G9: the draft-spec rate-limit headers, as integers. */
export function rateLimitHeaders(res: Res): { limit: number; remaining: number; reset: number } {
  const read = (name: string) => {
    const value = res.headers[name];
    assert.match(String(value), /^\d+$/, `${name} on ${res.status} ${res.raw.body}`);
    return Number(value);
  };
  return {
    limit: read('ratelimit-limit'),
    remaining: read('ratelimit-remaining'),
    reset: read('ratelimit-reset'),
  };
}

export interface FieldError {
  resource: string;
  field: string;
  type: string;
  code: string;
  message: string;
}

/**
 * G7/G8: a 400 in the documented error shape whose `errors` has an entry on `field` (of `type` and
 * `code` when given). Answers that entry for further checks (its message, its resource).
 */
export function expectFieldError(
  res: Res,
  field: string,
  type?: string,
  code?: string,
  options: {
    /** Default 400; a rule on a valid value (the spec's 422) passes 422. */
    status?: 400 | 422;
    /** The entry's `resource`, checked when given. */
    resource?: string;
    /** The entry is the only one of the response. */
    only?: boolean;
  } = {},
): FieldError {
  assertErrorBody(res, options.status ?? 400);
  const entry: FieldError | undefined = res.body.errors.find((e: FieldError) => e.field === field);
  assert.ok(entry, `no error on ${field}: ${res.raw.body}`);
  if (type !== undefined) assert.equal(entry.type, type, res.raw.body);
  if (code !== undefined) assert.equal(entry.code, code, res.raw.body);
  if (options.resource !== undefined) assert.equal(entry.resource, options.resource, res.raw.body);
  if (options.only) assert.equal(res.body.errors.length, 1, res.raw.body);
  return entry;
}
