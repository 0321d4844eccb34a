import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { Signer } from '../../secrets.js';
import type { InstallsService } from '../installs/installs.service.js';
import * as repo from './offload.repo.js';
import type { LargeFsPatch, LargeFsSettings } from './offload.schemas.js';

export interface OffloadDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lock'>;
  /** Derives each install's LargeFS validation file (stable, unguessable without the secret key). */
  signer: Signer;
}

/** Defaults of a path setting the client left out. */
function complete(settings: LargeFsSettings): repo.StoredSettings {
  return {
    ...settings,
    path_settings: (settings.path_settings ?? []).map((p) => ({
      path: p.path,
      excluded_paths: p.excluded_paths ?? [],
      redirect_type: p.redirect_type ?? 'permanent',
    })),
  };
}

/** Two path settings for one path would make the redirect ambiguous. */
function assertDistinctPaths(settings: repo.StoredSettings) {
  const seen = new Set<string>();
  settings.path_settings.forEach((p, i) => {
    const key = p.path.replace(/\/+$/, '');
    if (seen.has(key)) {
      throw Errors.invalidValue(
        'offload_settings',
        `largefs_settings.path_settings[${i}].path`,
        `Path ${p.path} is listed twice in path_settings`,
        'duplicate_path',
      );
    }
    seen.add(key);
  });
}

export function createOffloadService({ db, clock, installs, signer }: OffloadDeps) {
  async function write(
    caller: Caller,
    installId: string,
    next: (current: repo.StoredSettings | null) => repo.StoredSettings,
  ) {
    await installs.requireInstall(caller, installId, 'installs:operate');
    return withTransaction(db, async (tx) => {
      if (!(await installs.lock(tx, installId))) throw Errors.notFound();
      const settings = next(await repo.findSettings(tx, installId));
      assertDistinctPaths(settings);
      await repo.saveSettings(tx, installId, settings, clock.now());
      return settings;
    });
  }

  return {
    async get(caller: Caller, installId: string) {
      await installs.requireInstall(caller, installId, 'installs:read');
      return repo.findSettings(db, installId);
    },

    /** updateOffloadSettings: replaces the whole configuration. */
    replace: (caller: Caller, installId: string, settings: LargeFsSettings) =>
      write(caller, installId, () => complete(settings)),

    /**
     * patchOffloadSettings: the fields given replace the stored ones. On an install without settings
     * the patch must itself be a whole configuration (cloud, bucket and bucket_region).
     */
    patch: (caller: Caller, installId: string, patch: LargeFsPatch) =>
      write(caller, installId, (current) => {
        const merged = { ...current, ...patch };
        const missing = (['cloud', 'bucket', 'bucket_region'] as const).filter(
          (k) => merged[k] === undefined,
        );
        if (missing.length > 0) {
          throw Errors.invalidValue(
            'offload_settings',
            'largefs_settings',
            `The install has no offload settings yet, so the patch must give ${missing.join(', ')} too (or configure with POST first)`,
            'not_configured',
          );
        }
        return complete(merged as LargeFsSettings);
      }),

    /** getLargeFSValidationFile: a name and content derived from the install id, the same on every call. */
    async validationFile(caller: Caller, installId: string) {
      await installs.requireInstall(caller, installId, 'installs:read');
      const digest = signer.sign(`largefs-validation:${installId}`).toString('hex');
      return { name: `${digest.slice(0, 8)}.largefs`, content: digest.slice(8, 24) };
    },
  };
}

export type OffloadService = ReturnType<typeof createOffloadService>;
export type { StoredSettings } from './offload.repo.js';
