import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { baseUrl } from './pagination.js';

/** The absolute URL of an operation (PUBLIC_URL, else the request's host). */
export function operationUrl(request: FastifyRequest, publicUrl: string | null, operationId: string): string {
  return `${baseUrl(request, publicUrl)}/v1/operations/${operationId}`;
}

/** Every asynchronous answer carries its operation's URL (design.md: operations). */
export function withLocation(
  reply: FastifyReply,
  request: FastifyRequest,
  publicUrl: string | null,
  operationId: string,
): FastifyReply {
  return reply.header('location', operationUrl(request, publicUrl, operationId));
}

/** The Location header of a 202 (response `headers` as @fastify/swagger reads them: name -> schema). */
export const LocationHeader = {
  location: Type.String({
    format: 'uri',
    description: 'Absolute URL of the operation (GET /v1/operations/{id})',
  }),
};
