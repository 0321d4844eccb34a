import { callerOf } from '../../http/auth.js';
import { baseUrl, envelope, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  ArchiveFileSchema,
  ArchiveList,
  ArchivesParams,
  ArchivesQuery,
  DownloadParams,
  DownloadQuery,
} from './archives.schemas.js';
import type { ArchiveLink, ArchiveRow } from './archives.service.js';

/** Projection of a backup (and the operation that made it) into the reference's Archive record. */
function toArchive(row: ArchiveRow, link: ArchiveLink | null, base: string) {
  const emails = (row.operation_input as { notification_emails?: string[] } | null)?.notification_emails;
  return {
    id: row.id,
    backup: { id: row.id },
    notification_emails: emails ?? [],
    state: row.status,
    create_time: row.create_time.toISOString(),
    ...(row.started_at && { start_time: row.started_at.toISOString() }),
    complete_time: row.status === 'completed' ? (row.complete_time?.toISOString() ?? null) : null,
    abort_time: row.status === 'aborted' ? (row.ended_at?.toISOString() ?? null) : null,
    download_uri: link ? `${base}${link.path}?expires=${link.expires}&signature=${link.signature}` : null,
  };
}

/** listArchives, behind Basic auth like every /v1 route. */
export function archivesRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/installs/:install_id/archives',
      {
        schema: {
          operationId: 'listArchives',
          tags: ['Archive'],
          summary: "An install's archives (one per backup), newest first, with signed download links",
          params: ArchivesParams,
          querystring: ArchivesQuery,
          response: { 200: ArchiveList, ...errorResponses(400, 403, 404) },
        },
        config: { resource: 'archive' },
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.archives.list(
          callerOf(request),
          request.params.install_id,
          page,
        );
        const base = baseUrl(request, config.publicUrl);
        return envelope(
          request,
          config.publicUrl,
          page,
          count,
          rows.map((r) => toArchive(r.row, r.link, base)),
        );
      },
    );
  };
}

/**
 * downloadArchive: outside Basic auth, because the signed link is the credential (a browser or curl
 * can follow download_uri as given). Rate limited like every route.
 */
export function archiveDownloadRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/installs/:install_id/archives/:archive_id/download',
      {
        schema: {
          operationId: 'downloadArchive',
          tags: ['Archive'],
          summary: 'The archive file, for a signed link from listArchives (403 once expired)',
          security: [],
          params: DownloadParams,
          querystring: DownloadQuery,
          response: { 200: ArchiveFileSchema, ...errorResponses(400, 403, 404, 502) },
        },
        config: { resource: 'archive' },
      },
      async (request, reply) => {
        const { install_id, archive_id } = request.params;
        const { expires, signature } = request.query;
        const file = await services.archives.download(install_id, archive_id, expires, signature);
        if (file.size !== null) reply.header('content-length', file.size);
        // A stream that fails midway (a checksum that does not match) ends the response short of its
        // Content-Length: the client sees a broken download, never a complete-looking wrong one.
        return reply
          .header('content-type', file.contentType)
          .header('content-disposition', `attachment; filename="${file.fileName}"`)
          .header('cache-control', 'private, no-store')
          .send(file.body);
      },
    );
  };
}
