import type { Db } from '../../db/client.js';
import { type HostingDriver, installRef } from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import type { JobQueue } from '../../jobs/queue.js';
import {
  inputOf,
  type OperationInput,
  type OperationRecords,
  type OperationsService,
} from '../operations/operations.service.js';
import type { InstallRow } from './installs.repo.js';
import type { InstallsService } from './installs.service.js';

export interface InstallJobsDeps {
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail' | 'find' | 'setResult'>;
  installs: Pick<InstallsService, 'findById' | 'applySoftware'>;
  driver: HostingDriver;
  /**
   * Issue 21: in the transaction that makes the install active, its domains (added while it was
   * pending) are routed (the routing module; nothing when it has none).
   */
  routeProvisioned?: (tx: Db, installId: string) => Promise<void>;
  /**
   * Issue 21: in the transaction that completes a copy, the destination's routing applied again when
   * the driver keeps routing in the content (`routingInContent`: the copy brought the source's).
   */
  requestRouting?: (tx: Db, install: { id: string; account_id: string; status: string }) => Promise<void>;
  /** C1-C4: the source's domain names, rewritten in a copy's rows (decision #223). */
  sourceNames?: (installId: string) => Promise<string[]>;
}

export interface ProvisioningDeps {
  operations: Pick<OperationRecords, 'start'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

/**
 * I7: the installs service's `startProvisioning`: in the transaction that creates the install, its
 * provisioning operation and job. Needs only operation records, so it exists before both services.
 */
export function createProvisioning({ operations, driver }: ProvisioningDeps) {
  return async (tx: Db, install: InstallRow) => {
    await operations.start(tx, {
      install,
      type: 'provision_install',
      resource: { type: 'install', id: install.id },
      input: {},
      expectedSeconds: driver.estimateSeconds('provision'),
    });
  };
}

type OperationPayload = { operation_id: string };

/** Issue 16: in the transaction that deletes an install, the job that deprovisions it. */
export function createDeprovisioning({ queue }: { queue: Pick<JobQueue, 'enqueue'> }) {
  return async (tx: Db, installId: string) => {
    await queue.enqueue(tx, 'deprovision_install', { install_id: installId });
  };
}

/** The deprovision_install job: the driver removes what it holds for a deleted install. */
export function createDeprovisionJob({ driver }: { driver: HostingDriver }) {
  const job: JobHandler<{ install_id: string }> = {
    async run({ install_id }, ctx) {
      // The install row is gone: the driver is told only its id (the key too: one install, one removal).
      await driver.deprovision(
        { key: install_id, signal: ctx.signal },
        { id: install_id, name: '', wp_version: null },
      );
    },
    // The worker logged every failed attempt; what is left on the host is the operator's to remove.
    async exhausted() {},
  };
  return job;
}

type CopyInput = OperationInput<'copy_install'>;

function copyDetails(source: { id: string; name: string } | null, input: CopyInput): [string, string][] {
  return [
    ['Source', source ? `${source.name} (${source.id})` : input.source_install_id],
    ['Files', input.include_files ? 'copied' : 'not copied'],
    [
      'Database',
      input.include_db ? (input.db_tables ? input.db_tables.join(', ') : 'all tables') : 'not copied',
    ],
  ];
}

/** The provision_install and copy_install jobs (jobs/catalog.ts). Each step is safe to run twice. */
export function createInstallJobs({
  operations,
  installs,
  driver,
  routeProvisioned,
  requestRouting,
  sourceNames,
}: InstallJobsDeps) {
  /** Issue 21: the driver drops its copy of the administrator's password once the operation holds it. */
  async function forgetAdminPassword(operationId: string) {
    const op = await operations.find(operationId);
    if (op?.status === 'completed' && op.install_id) await driver.forgetAdminPassword?.(op.install_id);
  }

  const provision: JobHandler<OperationPayload> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      // Ended: a run that died between completing and the driver's forgetting finishes the latter.
      if (!op) return forgetAdminPassword(operation_id);
      const install = await installs.findById(op.install_id);
      if (!install) return;
      const result = await driver.provision({ key: op.id, signal: ctx.signal }, installRef(install));
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      const admin = result.value.wordpress_admin;
      await operations.complete(op.id, async (tx) => {
        // I7: provisioning is what makes an install active.
        await installs.applySoftware(tx, install.id, {
          status: 'active',
          ...(result.value.wp_version && { wp_version: result.value.wp_version }),
          ...(result.value.php_version && { php_version: result.value.php_version }),
        });
        // Issue 21: the owner's WordPress administrator; its password sealed, shown once (operations).
        if (admin)
          await operations.setResult(
            tx,
            op.id,
            { wordpress_admin: { username: admin.username, login_url: admin.login_url } },
            admin.password,
          );
        await routeProvisioned?.(tx, install.id);
        return undefined;
      });
      await forgetAdminPassword(op.id);
    },
    async exhausted({ operation_id }, error) {
      // The install stays pending: the operation says why, and an operator can retry or fix it.
      await operations.fail(operation_id, `Provisioning failed: ${error}`, async () => undefined);
    },
  };

  const copy: JobHandler<OperationPayload> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      if (!op) return;
      const input = inputOf(op, 'copy_install');
      const destination = await installs.findById(op.install_id);
      if (!destination) return;
      const source = await installs.findById(input.source_install_id);
      if (!source) {
        await operations.fail(
          op.id,
          `The source install ${input.source_install_id} was deleted; nothing was copied`,
          async () => ({
            details: copyDetails(null, input),
          }),
        );
        return;
      }
      const result = await driver.copy(
        { key: op.id, signal: ctx.signal },
        {
          source: installRef(source),
          destination: installRef(destination),
          include_files: input.include_files,
          include_db: input.include_db,
          db_tables: input.db_tables,
          ...(sourceNames && { source_names: await sourceNames(source.id) }),
        },
      );
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async (tx) => {
        // C2: the destination now runs what was copied over.
        if (input.include_files)
          await installs.applySoftware(tx, destination.id, { wp_version: result.value.wp_version });
        if (driver.routingInContent) await requestRouting?.(tx, destination);
        return { details: copyDetails(source, input) };
      });
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(operation_id, `The copy failed: ${error}`, async (tx, op) => {
        const input = inputOf(op, 'copy_install');
        return { details: copyDetails(await installs.findById(input.source_install_id, tx), input) };
      });
    },
  };

  return { provision, copy };
}
