import { callerOf } from '../../http/auth.js';
import { LocationHeader, withLocation } from '../../http/location.js';
import { envelope, pageOf } from '../../http/pagination.js';
import { DryRunQuery, errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import { OperationSchema } from '../operations/operations.schemas.js';
import { toOperation } from '../operations/operations.service.js';
import {
  BackupList,
  BackupParams,
  BackupSchema,
  BackupsParams,
  BackupsQuery,
  CreateBackupBody,
  RestoreBackupBody,
  RestoreBackupDryRun,
} from './backups.schemas.js';
import type { BackupRow } from './backups.service.js';

/** Projection of a backup row into the spec's Backup record (B2). */
export function toBackup(row: BackupRow) {
  return {
    id: row.id,
    status: row.status,
    description: row.description,
    create_time: row.create_time.toISOString(),
    complete_time: row.complete_time?.toISOString() ?? null,
    wordpress_version: row.wordpress_version,
  };
}

export function backupsRoutes({ config, services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Backups'];
    const routeConfig = { resource: 'backup' };

    app.post(
      '/installs/:install_id/backups',
      {
        schema: {
          operationId: 'createBackup',
          tags,
          summary: 'Request a backup (B1-B3); 202 with the Backup record and its operation in Location',
          params: BackupsParams,
          body: CreateBackupBody,
          response: {
            202: { ...BackupSchema, description: 'Accepted', headers: LocationHeader },
            ...errorResponses(400, 403, 404, 413, 415),
          },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const { backup, operation } = await services.backups.create(
          callerOf(request),
          request.params.install_id,
          request.body,
        );
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toBackup(backup));
      },
    );

    app.get(
      '/installs/:install_id/backups',
      {
        schema: {
          operationId: 'listBackups',
          tags,
          summary: "An install's backups, newest first",
          params: BackupsParams,
          querystring: BackupsQuery,
          response: { 200: BackupList, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) => {
        const page = pageOf(request.query);
        const { count, rows } = await services.backups.list(
          callerOf(request),
          request.params.install_id,
          page,
        );
        return envelope(request, config.publicUrl, page, count, rows.map(toBackup));
      },
    );

    app.get(
      '/installs/:install_id/backups/:backup_id',
      {
        schema: {
          operationId: 'showBackup',
          tags,
          summary: 'One backup',
          params: BackupParams,
          response: { 200: BackupSchema, ...errorResponses(400, 403, 404) },
        },
        config: routeConfig,
      },
      async (request) =>
        toBackup(
          await services.backups.get(callerOf(request), request.params.install_id, request.params.backup_id),
        ),
    );

    app.post(
      '/installs/:install_id/backups/:backup_id/restore',
      {
        schema: {
          operationId: 'restoreBackup',
          tags,
          summary:
            'Restore an install from a backup (R1-R3); 202 with the operation (`?dry_run=true`: what it would do, nothing changed)',
          params: BackupParams,
          querystring: DryRunQuery,
          body: RestoreBackupBody,
          response: {
            200: RestoreBackupDryRun,
            202: { ...OperationSchema, description: 'Accepted, restore initiated', headers: LocationHeader },
            ...errorResponses(400, 403, 404, 413, 415, 502),
          },
        },
        config: routeConfig,
      },
      async (request, reply) => {
        const { install_id, backup_id } = request.params;
        if (request.query.dry_run) {
          return services.backups.restoreDryRun(callerOf(request), install_id, backup_id, request.body);
        }
        const operation = await services.backups.restore(
          callerOf(request),
          request.params.install_id,
          request.params.backup_id,
          request.body,
        );
        return withLocation(reply, request, config.publicUrl, operation.id)
          .status(202)
          .send(toOperation(operation));
      },
    );
  };
}
