import { Type } from 'typebox';
import { Uuid } from '../../http/schemas.js';
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
