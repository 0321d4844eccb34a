import { Type } from 'typebox';
import { PageQuery, Paginated } from '../../http/pagination.js';
import { DateTime, Nullable, Uuid } from '../../http/schemas.js';

const Fields = Nullable(
  Type.Record(Type.String(), Type.Unknown(), {
    description: 'Fields of the resource (secrets and keys are never recorded: "[redacted]")',
  }),
);

/** Issue 22: one mutating call. */
export const AuditEventSchema = Type.Object(
  {
    id: Uuid(),
    occurred_at: DateTime(),
    account_id: Nullable(Uuid()),
    actor: Type.Object({
      type: Type.Union([Type.Literal('user'), Type.Literal('admin')], {
        description: '`user`: Basic auth; `admin`: the operator token',
      }),
      user_id: Nullable(Uuid()),
      credential_id: Nullable(Uuid({ description: 'The scoped credential used, if any' })),
      ip: Nullable(Type.String()),
    }),
    request_id: Type.String({ description: 'The x-request-id of the call' }),
    operation_id: Nullable(Uuid({ description: 'The operation the call started, if any' })),
    action: Type.String({ description: 'The operationId of the call (e.g. updateInstall)' }),
    method: Type.String(),
    path: Type.String({ description: 'The route pattern' }),
    resource: Type.Object({ type: Type.String(), id: Nullable(Type.String()) }),
    status: Nullable(
      Type.Integer({
        description: 'The answer; null when the process ended before it answered (outcome unknown)',
      }),
    ),
    before: Fields,
    after: Fields,
  },
  {
    examples: [
      {
        id: '1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f',
        occurred_at: '2026-11-26T01:00:00.000Z',
        account_id: 'e2f0a3a4-1c5b-4a61-9d0c-5e1d0f3b2a10',
        actor: {
          type: 'user',
          user_id: '0f4c9e1d-2b3a-4c5d-8e6f-7a8b9c0d1e2f',
          credential_id: null,
          ip: '203.0.113.7',
        },
        request_id: 'req-1x',
        operation_id: null,
        action: 'updateSite',
        method: 'PATCH',
        path: '/v1/sites/:site_id',
        resource: { type: 'site', id: '5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e' },
        status: 200,
        before: { name: 'Old name' },
        after: { name: 'New name' },
      },
    ],
  },
);

export const AuditEventList = Paginated(AuditEventSchema, 'A page of audit events, newest first');

export const AuditQuery = Type.Object({
  ...PageQuery.properties,
  actor_user_id: Type.Optional(Uuid({ description: 'Only calls by this user' })),
  credential_id: Type.Optional(Uuid({ description: 'Only calls with this scoped credential' })),
  resource_type: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'e.g. install, site, domain' }),
  ),
  resource_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  action: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: 'An operationId, e.g. deleteInstall' }),
  ),
  since: Type.Optional(DateTime()),
  until: Type.Optional(DateTime()),
});

export const AuditParams = Type.Object({ account_id: Uuid() });
