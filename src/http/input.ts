import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type AppError, Errors } from '../errors.js';

/**
 * Input that cannot be stored faithfully is refused in one place (issue 13, docs/conformance.wire.md):
 * - a JSON body that is not valid UTF-8 (it would be stored as U+FFFD): 400 `invalid_utf8` on `(body)`;
 * - a string (value or key) of the path, the query or the body holding U+0000 (PostgreSQL text refuses
 *   it) or a lone surrogate (stored as U+FFFD): 400 `invalid_string` naming the field;
 * - a number that is not finite (`limit=1e309` is coerced to Infinity, and AJV's range checks let it
 *   through; `1e309` in a JSON body parses to Infinity): 400 `invalid_number` naming the field.
 * The credential of the Basic `Authorization` header is decoded in `http/auth.ts` (`parseBasic`), which
 * refuses the same things with a 401.
 */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A UTF-16 surrogate without its pair. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when the text can be stored and read back unchanged: no U+0000, no lone surrogate. */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text);
}

/** Decodes UTF-8 strictly; null when the bytes are not valid UTF-8 (overlong, surrogates, truncated). */
export function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return null;
  }
}

interface Problem {
  field: string;
  kind: 'string' | 'number';
}

/** Field name as in errors[] (G7): `domains[3].name`; a key itself is named by its path. */
function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

/** The first unstorable string or non-finite number in a parsed value, iteratively (any depth). */
export function findUnstorable(value: unknown, root = ''): Problem | null {
  const stack: [unknown, string][] = [[value, root]];
  while (stack.length > 0) {
    const [current, path] = stack.pop() as [unknown, string];
    if (typeof current === 'string') {
      if (!isStorableText(current)) return { field: path, kind: 'string' };
    } else if (typeof current === 'number') {
      if (!Number.isFinite(current)) return { field: path, kind: 'number' };
    } else if (ArrayBuffer.isView(current)) {
      // Bytes (an application/octet-stream body: the agents' archive parts) hold no text to store;
      // walking a Buffer's indexes as an object's keys cost seconds of CPU per 8 MiB part.
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push([current[i], join(path, i)]);
    } else if (current !== null && typeof current === 'object') {
      const entries = Object.entries(current);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i] as [string, unknown];
        const field = join(path, key);
        if (!isStorableText(key)) return { field, kind: 'string' };
        stack.push([item, field]);
      }
    }
  }
  return null;
}

function resourceOf(request: FastifyRequest): string {
  return request.routeOptions.config?.resource ?? 'request';
}

function problemError(request: FastifyRequest, context: string, problem: Problem): AppError {
  const field = problem.field || '(body)';
  const where = context === 'body' ? '' : ` (${context})`;
  return problem.kind === 'string'
    ? Errors.invalidValue(
        resourceOf(request),
        field,
        `${field}${where} must not contain U+0000 or unpaired UTF-16 surrogates`,
        'invalid_string',
      )
    : Errors.invalidValue(
        resourceOf(request),
        field,
        `${field}${where} must be a finite number`,
        'invalid_number',
      );
}

/**
 * Installs the guard on an app, before any route is registered: the JSON body parser (strict UTF-8,
 * then Fastify's own prototype-poisoning-safe parser) and a preHandler hook over params, query and
 * body, after schema validation and coercion (so `limit=1e309` is seen as the number it became).
 */
export function installInputGuard(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const text = decodeUtf8(body as Buffer);
    if (text === null) {
      done(
        Errors.invalidValue(
          resourceOf(request),
          '(body)',
          'The request body is not valid UTF-8',
          'invalid_utf8',
        ),
        undefined,
      );
      return;
    }
    // The default parser is synchronous and answers through `done`.
    void parseJson(request, text, done);
  });

  app.addHook('preHandler', async (request) => {
    for (const [context, value] of [
      ['path', request.params],
      ['query', request.query],
      ['body', request.body],
    ] as const) {
      const problem = findUnstorable(value);
      if (!problem) continue;
      // G12: where a malformed path id is a 404, an unstorable one is too (it can name nothing).
      if (context === 'path' && request.routeOptions.config?.badPathIsNotFound) throw Errors.notFound();
      throw problemError(request, context, problem);
    }
  });
}
