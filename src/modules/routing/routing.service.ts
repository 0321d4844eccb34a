import type { Db } from '../../db/client.js';
import {
  type HostingDriver,
  type InstallRef,
  installRef,
  type RoutedCertificate,
  type RoutedDomain,
  type RoutingRequest,
} from '../../drivers/driver.js';
import type { JobHandler } from '../../jobs/catalog.js';
import type { InstallRow } from '../installs/installs.service.js';
import type { OperationRecords, OperationsService } from '../operations/operations.service.js';

/**
 * Issue 21: an install's routing (its default name, domains, primary, redirects and certificates) as
 * the hosting driver serves it. Every change to one of those starts (or joins, while one is queued)
 * an `apply_routing` operation in the change's own transaction; its step reads the whole current
 * state and hands it to the driver, which rebuilds what it serves (idempotent). A failure (nginx
 * refusing the configuration) fails the step, which is retried, then fails the operation, visible in
 * the install's operations; what was served before keeps being served (decisions.md #93).
 */

/** The install as the change's transaction locked it. */
type LockedInstall = Pick<InstallRow, 'id' | 'account_id' | 'status'>;

/** In the caller's transaction: routing applied after it commits (nothing for a pending install). */
export type RequestRouting = (tx: Db, install: LockedInstall) => Promise<void>;

/** Whether a change of the install's routing starts `apply_routing` (a dry run says so too). */
export const routingApplies = (install: Pick<InstallRow, 'status'>) => install.status === 'active';

export function createRoutingRequests(deps: {
  operations: Pick<OperationRecords, 'startCoalesced'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}): RequestRouting {
  return async (tx, install) => {
    // A pending install is routed when its provisioning completes (installs.jobs.ts).
    if (!routingApplies(install)) return;
    await deps.operations.startCoalesced(tx, {
      install,
      type: 'apply_routing',
      resource: { type: 'install', id: install.id },
      input: {},
      expectedSeconds: deps.driver.estimateSeconds('apply_routing'),
    });
  };
}

export interface RoutingStateDeps {
  /** The install's domains: name, primary, the name of the domain it redirects to. */
  domains: { routesOf(installId: string): Promise<RoutedDomain[]> };
  /** The install's certificates with their keys opened, newest first, each with the names it covers. */
  certificates: { servedOf(installId: string): Promise<RoutedCertificate[]> };
  /** INSTALL_DOMAIN: the default name is `<install>.<installDomain>`. */
  installDomain: string;
  /** Issue 30: whether the install's writes are frozen (its move's final sync); absent: never. */
  frozen?: (installId: string) => Promise<boolean>;
}

/** An install's whole routing state as the driver serves it (the job's, and a move's target, issue 30). */
export function createRoutingState(deps: RoutingStateDeps) {
  return async (install: InstallRef): Promise<RoutingRequest> => ({
    install: installRef(install),
    default_name: `${install.name}.${deps.installDomain}`,
    domains: await deps.domains.routesOf(install.id),
    certificates: await deps.certificates.servedOf(install.id),
    frozen: (await deps.frozen?.(install.id)) ?? false,
  });
}

export interface RoutingJobDeps extends RoutingStateDeps {
  installs: { findById(installId: string | null): Promise<InstallRow | null> };
  operations: Pick<OperationsService, 'begin' | 'waitUntil' | 'complete' | 'fail'>;
  driver: Pick<HostingDriver, 'applyRouting'>;
}

/** The apply_routing job (jobs/catalog.ts): the whole routing state to the driver, once per step. */
export function createRoutingJob(deps: RoutingJobDeps): JobHandler<{ operation_id: string }> {
  const { installs, operations, driver } = deps;
  const routingOf = createRoutingState(deps);
  return {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      if (!op?.install_id) return;
      const install = await installs.findById(op.install_id);
      if (!install) return;
      // Read after the operation began: every change committed before it is included.
      const result = await driver.applyRouting({ key: op.id, signal: ctx.signal }, await routingOf(install));
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      await operations.complete(op.id, async () => ({
        details: [['Names served', result.value.names.join(', ')]],
      }));
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(
        operation_id,
        `Applying the install's domains and certificates failed (what was served before is still served): ${error}`,
        async () => undefined,
      );
    },
  };
}
