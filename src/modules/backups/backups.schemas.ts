import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, DryRunAnswer, Nullable, Uuid } from '../../http/schemas.js';
import { NotificationEmails } from '../operations/operations.schemas.js';

export const BACKUP_STATUSES = ['requested', 'in_progress', 'completed', 'aborted'] as const;

/** The spec's Backup record (B2): exactly its six fields. */
export const BackupSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    status: Type.String({ enum: [...BACKUP_STATUSES] }),
    description: Type.String(),
    create_time: DateTime(),
    complete_time: Nullable(DateTime()),
    wordpress_version: Nullable(Type.String()),
  },
  { description: 'A backup' },
);

export const BackupList = Paginated(BackupSchema, 'A page of backups, newest first');
export const BackupsParams = Type.Object({ install_id: Uuid() });
export const BackupParams = Type.Object({ install_id: Uuid(), backup_id: Uuid() });
export const BackupsQuery = PageQuery;

/** B1: description and notification_emails are required. */
export const CreateBackupBody = Type.Object({
  description: Type.String({ minLength: 1, maxLength: 1000 }),
  notification_emails: NotificationEmails,
});

/** R1: notification_emails required; restore_database and create_checkpoint default to true. */
export const RestoreBackupBody = Type.Object({
  notification_emails: NotificationEmails,
  restore_database: Type.Optional(Type.Boolean({ default: true })),
  create_checkpoint: Type.Optional(
    Type.Boolean({ default: true, description: 'R2: take a checkpoint backup before restoring' }),
  ),
});

/** Issue 22: what `POST /v1/installs/{id}/backups/{id}/restore?dry_run=true` answers. */
export const RestoreBackupDryRun = DryRunAnswer(
  {
    operation: Type.Literal('restore_backup', { description: 'The operation the restore would start' }),
    install_id: Uuid({ description: 'The install that would be overwritten' }),
    backup_id: Uuid(),
    restore_database: Type.Boolean(),
    create_checkpoint: Type.Boolean({ description: 'R2: a checkpoint backup would be taken first' }),
    notification_emails: Type.Array(Type.String(), { description: 'Who would be mailed when it ends' }),
    expected_seconds: Type.Number({ description: 'How long the restore is expected to take' }),
  },
  {
    description: 'what the restore would do',
    example: {
      operation: 'restore_backup',
      install_id: '3c1d5e7f-9a0b-4c2d-8e4f-6a8b0c2d4e6f',
      backup_id: '9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
      restore_database: true,
      create_checkpoint: true,
      notification_emails: ['ops@example.com'],
      expected_seconds: 180,
    },
  },
);
