import type { Readable } from 'node:stream';
import {
  type ArchiveSource,
  type CallContext,
  DriverError,
  type DriverFile,
  type DriverOperation,
  type DriverResult,
  type HostingDriver,
  type InstallRef,
  type Snapshot,
} from '../drivers/driver.js';

/** What the remote driver needs of the control plane's fleet calls (modules/servers). */
export interface FleetCallsPort {
  ask(spec: {
    method: string;
    operation: DriverOperation;
    key: string;
    installId: string;
    input: unknown;
  }): Promise<{ done: true; value: unknown } | { done: false; checkAt: Date }>;
  forgetAdminPassword(installId: string): Promise<void>;
  /** The server an install is placed on (null: not placed). */
  serverOf(installId: string): Promise<string | null>;
  /** Issue 30 (decision #225): an archive an agent uploaded for a download; null when it is gone. */
  openArchive(archive: {
    id: string;
    sha256: string;
    bytes: number;
  }): Promise<{ body: Readable; size: number } | null>;
}

/** How long a download waits for its archive to arrive from the install's server (decision #225). */
const EXPORT_WAIT_MS = 120_000;
const DAY_MS = 86_400_000;

/** The calls an agent runs: the driver method, with the operation it is part of. */
export const REMOTE_METHODS = {
  provision: 'provision',
  copy: 'copy',
  backup: 'backup',
  restore: 'restore',
  measureDisk: 'measure_disk',
  purgeCache: 'purge_cache',
  issueCertificate: 'issue_certificate',
  applyRouting: 'apply_routing',
  deprovision: 'deprovision',
  /** Issue 30 (decision #225): a backup's archive uploaded to the control plane for its download. */
  exportArchive: 'backup',
  /**
   * Issue 30 (decision #226): a backup a move carries, kept on the target from the archive its source
   * exported; answers the snapshot as the target holds it.
   */
  adoptBackup: 'backup',
} as const satisfies Record<string, DriverOperation>;
export type RemoteMethod = keyof typeof REMOTE_METHODS;

const ESTIMATES: Record<DriverOperation, number> = {
  provision: 120,
  copy: 300,
  backup: 300,
  restore: 300,
  measure_disk: 30,
  purge_cache: 5,
  move_site: 1,
  issue_certificate: 120,
  apply_routing: 10,
  deprovision: 60,
};

/**
 * Issue 30 (`HOSTING_DRIVER=fleet`): every call for an install goes to the agent of the install's
 * server, through its queue (modules/servers/servers.calls.service.ts), and answers ask-again until
 * the agent reported it: the driver's semantics (keyed, idempotent, `DriverResult`) unchanged.
 */
export function createRemoteDriver(calls: FleetCallsPort): HostingDriver {
  const ask = <T>(method: RemoteMethod, ctx: CallContext, installId: string, input: unknown) =>
    calls.ask({ method, operation: REMOTE_METHODS[method], key: ctx.key, installId, input }) as Promise<
      DriverResult<T>
    >;
  return {
    name: 'fleet',
    // The agents' local driver keeps home and siteurl in the install's database (issue 21).
    routingInContent: true,
    estimateSeconds: (operation) => ESTIMATES[operation],
    provision: (ctx, install) => ask('provision', ctx, install.id, install),
    forgetAdminPassword: (installId) => calls.forgetAdminPassword(installId),
    async copy(ctx, input) {
      const [from, to] = await Promise.all([
        calls.serverOf(input.source.id),
        calls.serverOf(input.destination.id),
      ]);
      if (!from || !to || from === to) return ask('copy', ctx, input.destination.id, input);
      // Issue 30: across servers, the source's backup (on its server, its archive sent to the
      // control plane), then the copy from it on the destination's, whose agent fetches that archive:
      // both keyed by the copy's key (decisions #179, #195).
      const source = await ask<Snapshot>(
        'backup',
        { ...ctx, key: `${ctx.key}:copy-source` },
        input.source.id,
        { ...input.source, upload_archive: true },
      );
      if (!source.done) return source;
      return ask('copy', ctx, input.destination.id, { ...input, source_snapshot: source.value });
    },
    backup: (ctx, install) => ask('backup', ctx, install.id, install),
    restore: (ctx, input) => ask('restore', ctx, input.install.id, input),
    measureDisk: (ctx, install) => ask('measureDisk', ctx, install.id, install),
    purgeCache: (ctx, input) => ask('purgeCache', ctx, input.install_id, input),
    // A site transfer changes accounts only: nothing moves on the hosting servers.
    moveSite: async () => ({ done: true, value: {} }),
    issueCertificate: (ctx, input) => ask('issueCertificate', ctx, input.install.id, input),
    applyRouting: (ctx, input) => ask('applyRouting', ctx, input.install.id, input),
    deprovision: (ctx, install: InstallRef) => ask('deprovision', ctx, install.id, install),
    /**
     * Issue 30 (decision #225): the install's agent uploads the backup's archive (the local driver's
     * exportArchive, each artefact checked as it is read) to the control plane's store, where the
     * download reads it (its SHA-256 checked again); one upload a day serves every download of it.
     * The download waits for it up to EXPORT_WAIT_MS; past that, a retryable error.
     */
    async exportArchive(source: ArchiveSource): Promise<DriverFile> {
      const spec = {
        method: 'exportArchive',
        operation: 'backup' as const,
        // Uploaded once a day at most: the store's sweep removes archives older than a day.
        key: `export:${source.backup.id}:${Math.floor(Date.now() / DAY_MS)}`,
        installId: source.install.id,
        input: { install: source.install, snapshot: source.backup.snapshot },
      };
      const deadline = Date.now() + EXPORT_WAIT_MS;
      for (;;) {
        const result = await calls.ask(spec);
        if (result.done) {
          const archive = (result.value as { archive?: { id: string; sha256: string; bytes: number } })
            ?.archive;
          const file = archive ? await calls.openArchive(archive) : null;
          if (!file)
            throw new DriverError('backup', "the backup's archive is no longer on the control plane", false);
          return {
            fileName: `${source.install.name}-${source.backup.id}.tar`,
            contentType: 'application/x-tar',
            body: file.body,
            size: file.size,
          };
        }
        if (Date.now() >= deadline)
          throw new DriverError(
            'backup',
            "the archive is still on its way from the install's hosting server: try the link again in a minute",
          );
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(1000, Math.max(100, result.checkAt.getTime() - Date.now()))),
        );
      }
    },
  };
}
