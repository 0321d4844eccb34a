import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
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
