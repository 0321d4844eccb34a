import { callerOf } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import type { RouteContext, RoutesPlugin } from '../../route-context.js';
import {
  OffloadParams,
  OffloadSettingsSchema,
  PatchOffloadBody,
  PutOffloadBody,
  ValidationFileSchema,
} from './offload.schemas.js';
import type { StoredSettings } from './offload.service.js';

const toSettings = (settings: StoredSettings | null) => (settings ? { largefs_settings: settings } : {});

export function offloadRoutes({ services }: RouteContext): RoutesPlugin {
  return async (app) => {
    const tags = ['Offload Settings'];
    const config = { resource: 'offload_settings' };
    const path = '/installs/:install_id/offload_settings/files';
    const accepted = { ...OffloadSettingsSchema, description: 'Accepted: the stored settings' };

    app.get(
      path,
      {
        schema: {
          operationId: 'getOffloadSettings',
          tags,
          summary: "The install's LargeFS offload settings ({} until configured)",
          params: OffloadParams,
          response: { 200: OffloadSettingsSchema, ...errorResponses(400, 403, 404) },
        },
        config,
      },
      async (request) => toSettings(await services.offload.get(callerOf(request), request.params.install_id)),
    );

    app.post(
      path,
      {
        schema: {
          operationId: 'updateOffloadSettings',
          tags,
          summary: 'Configure LargeFS offloading (replaces the whole configuration); 202',
          params: OffloadParams,
          body: PutOffloadBody,
          response: { 202: accepted, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config,
      },
      async (request, reply) => {
        const { install_id } = request.params;
        const settings = await services.offload.replace(
          callerOf(request),
          install_id,
          request.body.largefs_settings,
        );
        return reply.status(202).send(toSettings(settings));
      },
    );

    app.patch(
      path,
      {
        schema: {
          operationId: 'patchOffloadSettings',
          tags,
          summary: 'Change some LargeFS settings (the fields given replace the stored ones); 202',
          params: OffloadParams,
          body: PatchOffloadBody,
          response: { 202: accepted, ...errorResponses(400, 403, 404, 413, 415) },
        },
        config,
      },
      async (request, reply) => {
        const { install_id } = request.params;
        const settings = await services.offload.patch(
          callerOf(request),
          install_id,
          request.body.largefs_settings,
        );
        return reply.status(202).send(toSettings(settings));
      },
    );

    app.get(
      '/installs/:install_id/offload_settings/largefs_validation_file',
      {
        schema: {
          operationId: 'getLargeFSValidationFile',
          tags,
          summary: 'The file to place in the bucket so LargeFS can validate it',
          params: OffloadParams,
          response: { 200: ValidationFileSchema, ...errorResponses(400, 403, 404) },
        },
        config,
      },
      async (request) => services.offload.validationFile(callerOf(request), request.params.install_id),
    );
  };
}
