import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Strong ETags on every successful GET (and HEAD), and 304 Not Modified when the client already has
 * the body (`If-None-Match`, RFC 9110 13.1.2: weak comparison, `*` and lists accepted). The body is
 * still produced by the route, so authorization and visibility are checked exactly as before; only
 * the bytes on the wire are saved. The tag is a digest of the serialised body, so it changes with
 * any change the client could see.
 */
export function etagHook(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (err: null, payload: unknown) => void,
): void {
  // A callback hook, not an async one: it runs on every response, and never waits for anything.
  done(null, etagged(request, reply, payload));
}

function etagged(request: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
  if (request.method !== 'GET' && request.method !== 'HEAD') return payload;
  if (reply.statusCode !== 200) return payload;
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
  // A body from the read cache (http/read-cache.ts) comes with the tag computed when it was stored.
  const given = reply.getHeader('etag');
  const tag =
    typeof given === 'string' ? given : `"${createHash('sha1').update(payload).digest('base64url')}"`;
  if (typeof given !== 'string') reply.header('etag', tag);
  if (!matches(request.headers['if-none-match'], tag)) return payload;
  reply.code(304);
  reply.removeHeader('content-length');
  reply.removeHeader('content-type');
  return '';
}

function matches(header: string | undefined, tag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const value = candidate.trim();
    return value === '*' || value === tag || value === `W/${tag}`;
  });
}
