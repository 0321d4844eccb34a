import { Type } from 'typebox';
import { DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';
import { NotificationEmails } from '../operations/operations.schemas.js';

/** copyInstall (C1-C5). */
export const CopyInstallBody = Type.Object({
  source_environment_id: Uuid({ description: 'The install copied from' }),
  destination_environment_id: Uuid({ description: 'The install overwritten (C2)' }),
  notification_emails: Type.Optional(NotificationEmails),
  custom_options: Type.Optional(
    Type.Object({
      include_files: Type.Optional(Type.Boolean({ default: true })),
      include_db: Type.Optional(Type.Boolean({ default: true })),
      db_tables: Type.Optional(
        Type.Array(Type.String({ pattern: '^[A-Za-z0-9_$]{1,64}$' }), {
          minItems: 1,
          maxItems: 500,
          description: 'C3: only these tables; C4: only with include_db',
        }),
      ),
    }),
  ),
});

/** Issue 22: what `POST /v1/install_copy?dry_run=true` answers. */
export const CopyInstallDryRun = DryRunAnswer(
  {
    operation: Type.Literal('copy_install', { description: 'The operation the copy would start' }),
    source_install_id: Uuid(),
    destination_install_id: Uuid({ description: 'The install that would be overwritten' }),
    include_files: Type.Boolean(),
    include_db: Type.Boolean(),
    db_tables: Nullable(
      Type.Array(Type.String(), { description: 'The tables that would be copied; null: the whole database' }),
    ),
    notification_emails: Type.Array(Type.String(), { description: 'Who would be mailed when it ends' }),
    expected_seconds: Type.Number({ description: 'How long the copy is expected to take' }),
  },
  {
    description: 'what the copy would do',
    example: {
      operation: 'copy_install',
      source_install_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
      destination_install_id: '7e9f1a3b-5c7d-4e9f-8a1b-3c5d7e9f1a3b',
      include_files: false,
      include_db: true,
      db_tables: ['wp_posts', 'wp_postmeta'],
      notification_emails: ['ops@example.com'],
      expected_seconds: 120,
    },
  },
);
