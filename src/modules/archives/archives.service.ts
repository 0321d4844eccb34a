import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { DriverError, type HostingDriver, installRef, type Snapshot } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { Signer } from '../../secrets.js';
import type { InstallsService } from '../installs/installs.service.js';
import * as repo from './archives.repo.js';

export type { ArchiveRow } from './archives.repo.js';

/** How long a download link of listArchives works. */
export const ARCHIVE_LINK_SECONDS = 3600;

export interface ArchivesDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'findById'>;
  driver: Pick<HostingDriver, 'exportArchive'>;
  /** Signs download links (HMAC-SHA256 under a key derived from HOSTPLANE_SECRET_KEY). */
  signer: Signer;
}

/** A signed, expiring link: what download_uri holds (path and query; the route adds the base URL). */
export interface ArchiveLink {
  path: string;
  expires: number;
  signature: string;
}

const signed = (installId: string, archiveId: string, expires: number) =>
  `archive-download:${installId}:${archiveId}:${expires}`;

export function createArchivesService({ db, clock, installs, driver, signer }: ArchivesDeps) {
  function link(installId: string, archiveId: string): ArchiveLink {
    const expires = Math.floor(clock.now().getTime() / 1000) + ARCHIVE_LINK_SECONDS;
    const signature = signer.sign(signed(installId, archiveId, expires)).toString('base64url');
    return { path: `/v1/installs/${installId}/archives/${archiveId}/download`, expires, signature };
  }

  return {
    /** listArchives: one archive per backup of the install, newest first; completed ones get a link. */
    async list(caller: Caller, installId: string, page: Page) {
      await installs.requireInstall(caller, installId, 'installs:read');
      const { count, rows } = await repo.listArchives(db, installId, page);
      return {
        count,
        rows: rows.map((row) => ({ row, link: row.status === 'completed' ? link(installId, row.id) : null })),
      };
    },

    /**
     * downloadArchive: the link is the credential (like a pre-signed storage URL). A wrong or altered
     * signature, or one past its expiry by the service clock, is a 403; an archive that no longer
     * exists (backup or install deleted) is a 404.
     */
    async download(installId: string, archiveId: string, expires: number, signature: string) {
      const given = Buffer.from(signature, 'base64url');
      // Only the canonical encoding counts: base64url decoding ignores the last character's spare
      // bits, so an altered last character could otherwise decode to the same signature.
      const canonical = given.toString('base64url') === signature;
      if (!canonical || !signer.verify(signed(installId, archiveId, expires), given)) {
        throw Errors.forbiddenWith('The download link is not valid; list the archives again for a fresh one');
      }
      if (expires * 1000 < clock.now().getTime()) {
        throw Errors.forbiddenWith('The download link has expired; list the archives again for a fresh one');
      }
      const row = await repo.findArchive(db, installId, archiveId);
      const install = await installs.findById(installId);
      if (!row || !install || row.status !== 'completed' || !row.snapshot || !row.complete_time) {
        throw Errors.notFound();
      }
      try {
        return await driver.exportArchive({
          install: installRef(install),
          backup: {
            id: row.id,
            description: row.description,
            completed_at: row.complete_time,
            snapshot: row.snapshot as Snapshot,
          },
        });
      } catch (err) {
        // Issue 30 (decision #225): on a fleet the archive comes from the install's hosting server.
        if (!(err instanceof DriverError)) throw err;
        if (!err.final) throw Errors.busy(`The archive is not ready: ${err.message}`, 30);
        throw Errors.badUpstream(`The install's hosting server could not make the archive: ${err.message}`);
      }
    },
  };
}

export type ArchivesService = ReturnType<typeof createArchivesService>;
