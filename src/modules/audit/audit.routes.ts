import { callerOf } from '../../http/auth.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { AuditEventList, AuditParams, AuditQuery } from './audit.schemas.js';
import type { AuditEventRow } from './audit.service.js';

const toEvent = (row: AuditEventRow) => ({
  id: row.id,
  occurred_at: row.occurred_at.toISOString(),
  account_id: row.account_id,
  actor: {
    type: row.actor_type,
    user_id: row.actor_user_id,
    credential_id: row.credential_id,
    ip: row.ip,
  },
  request_id: row.request_id,
  operation_id: row.operation_id,
  action: row.action,
  method: row.method,
  path: row.path,
  resource: { type: row.resource_type, id: row.resource_id },
  status: row.status,
  before: row.before ?? null,
  after: row.after ?? null,
});

/** Issue 22: the audit log of an account (owners, and admin-scoped credentials of owners). */
export function auditRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    app.get(
      '/accounts/:account_id/audit_events',
      {
        schema: {
          operationId: 'listAuditEvents',
          tags: ['Audit'],
          summary: 'Every mutating call on the account (13 months), newest first',
          params: AuditParams,
          querystring: AuditQuery,
          response: { 200: AuditEventList, ...errorResponses(400, 403, 404) },
        },
        config: { resource: 'audit_event' },
      },
      async (request) => {
        const { query } = request;
        const page = pageOf(query);
        const { count, rows } = await services.audit.list(
          callerOf(request),
          {
            accountId: request.params.account_id,
            ...(query.actor_user_id && { actorUserId: query.actor_user_id }),
            ...(query.credential_id && { credentialId: query.credential_id }),
            ...(query.resource_type && { resourceType: query.resource_type }),
            ...(query.resource_id && { resourceId: query.resource_id }),
            ...(query.action && { action: query.action }),
            ...(query.since && { since: new Date(query.since) }),
            ...(query.until && { until: new Date(query.until) }),
          },
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toEvent));
      },
    );
  };
}
