import type { Readable } from 'node:stream';
import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

export const ARCHIVE_STATES = ['requested', 'in_progress', 'completed', 'aborted'] as const;

/** The reference's Archive: the downloadable export of one backup. */
export const ArchiveSchema = Type.Object(
  {
    id: Uuid({ description: "The archive's id (the id of the backup it exports)" }),
    backup: Type.Object({ id: Uuid() }),
    notification_emails: Type.Array(Type.String()),
    state: Type.String({ enum: [...ARCHIVE_STATES] }),
    create_time: DateTime(),
    start_time: Type.Optional(DateTime()),
    complete_time: Nullable(DateTime()),
    abort_time: Nullable(DateTime()),
    download_uri: Nullable(
      Type.String({
        format: 'uri',
        description: 'Signed link to the archive file, valid for one hour; only when state is completed',
      }),
    ),
  },
  { description: 'An archive' },
);

export const ArchiveList = Paginated(ArchiveSchema, 'A page of archives, newest first');
export const ArchivesParams = Type.Object({ install_id: Uuid() });
export const ArchivesQuery = PageQuery;

export const DownloadParams = Type.Object({ install_id: Uuid(), archive_id: Uuid() });
export const DownloadQuery = Type.Object({
  expires: Type.Integer({ minimum: 0, maximum: 99_999_999_999, description: 'Unix time the link expires' }),
  signature: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_-]+$' }),
});

/** The archive file itself (the simulated driver's is a tar.gz that says it is simulated). */
export const ArchiveFileSchema = Type.Unsafe<Readable>({
  type: 'string',
  format: 'binary',
  description:
    'The archive file (application/x-tar, uncompressed: the manifest.json, database.sql and files.tar.gz of the backup), streamed with its Content-Length',
});
