import type { FastifyRequest } from 'fastify';
import { type Static, type TSchema, Type } from 'typebox';
import type { Page } from '../db/page.js';
import { Nullable } from './schemas.js';

/** G5: limit 0-100 (default 100), offset >= 0 (default 0). */
export const PageQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 100, default: 100, description: 'Records to return' }),
  ),
  offset: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 2_147_483_647, default: 0, description: 'First record to return' }),
  ),
});
export type PageQuery = Static<typeof PageQuery>;

export function pageOf(query: PageQuery): Page {
  return { limit: query.limit ?? 100, offset: query.offset ?? 0 };
}

/** G6: the list envelope. */
export const Paginated = <T extends TSchema>(item: T, description: string) =>
  Type.Object(
    {
      previous: Nullable(Type.String({ format: 'uri', description: 'Absolute URL of the previous page' })),
      next: Nullable(Type.String({ format: 'uri', description: 'Absolute URL of the next page' })),
      count: Type.Integer({ description: 'Total number of results' }),
      results: Type.Array(item),
    },
    { description },
  );

/** Base of absolute URLs: PUBLIC_URL when set, else the request's own scheme and host. */
export function baseUrl(request: FastifyRequest, publicUrl: string | null): string {
  return publicUrl ?? `${request.protocol}://${request.host}`;
}

function pageUrl(request: FastifyRequest, publicUrl: string | null, offset: number): string {
  const url = new URL(request.url, 'http://placeholder');
  url.searchParams.set('offset', String(offset));
  return `${baseUrl(request, publicUrl)}${url.pathname}${url.search}`;
}

/** G6: wraps one page of results with absolute next/previous URLs (same query, other offset). */
export function envelope<T>(
  request: FastifyRequest,
  publicUrl: string | null,
  page: Page,
  count: number,
  results: T[],
) {
  const { limit, offset } = page;
  const next = limit > 0 && offset + limit < count ? pageUrl(request, publicUrl, offset + limit) : null;
  const previous = limit > 0 && offset > 0 ? pageUrl(request, publicUrl, Math.max(0, offset - limit)) : null;
  return { previous, next, count, results };
}
