import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';
import { OPERATION_STATUSES, OPERATION_TYPES } from './operations.service.js';

/** An asynchronous request (a Hostplane extension): GET /v1/operations/{operation_id}. */
export const OperationSchema = Type.Object(
  {
    id: Uuid(),
    type: Type.String({ enum: [...OPERATION_TYPES] }),
    status: Type.String({ enum: [...OPERATION_STATUSES] }),
    resource: Type.Object({
      type: Type.String({ description: 'install, backup or site_transfer' }),
      id: Uuid(),
    }),
    created_at: DateTime(),
    started_at: Nullable(DateTime()),
    completed_at: Nullable(DateTime()),
    error: Nullable(Type.String()),
    waiting_reason: Type.Optional(
      Type.String({
        description:
          'Issue 30: why the open operation waits (its hosting server is silent); absent when it does not wait',
      }),
    ),
    wordpress_admin: Type.Optional(
      Type.Object(
        {
          username: Type.String(),
          password: Type.Optional(
            Type.String({
              description:
                'Shown once: in the first read of the completed operation by an owner, then erased',
            }),
          ),
          login_url: Type.String({ format: 'uri' }),
        },
        {
          description:
            "Issue 21 (provision_install on a host that installs WordPress): the account owner's WordPress administrator",
        },
      ),
    ),
  },
  { description: 'An asynchronous operation' },
);

export const OperationList = Paginated(OperationSchema, 'A page of operations, newest first');
export const OperationParams = Type.Object({ operation_id: Uuid() });
export const OperationsQuery = PageQuery;

/** C6, B3, R3: who is told when the work ends. */
export const NotificationEmails = Type.Array(Type.String({ format: 'email', maxLength: 254 }), {
  maxItems: 50,
  description: 'Each address is notified when the work finishes',
});
