import type { Caller } from '../../auth/access.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { DriverError, type HostingDriver, installRef } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { JobHandler } from '../../jobs/catalog.js';
import { rescheduleAt } from '../../jobs/due.js';
import type { DomainsService } from '../domains/domains.service.js';
import type { InstallsService } from '../installs/installs.service.js';
import { inputOf, type OperationsService } from '../operations/operations.service.js';
import type { CertificatesService } from './certificates.service.js';

/** The reference's CertificateOrder: who holds the certificate. */
export interface CertificateOrderInput {
  email_address: string;
  given_name: string;
  family_name: string;
  region_code: string;
  state?: string;
  city?: string;
  phone?: string;
}

export interface CertificateOrdersDeps {
  db: Db;
  installs: Pick<InstallsService, 'requireInstall' | 'lock' | 'findById'>;
  domains: Pick<DomainsService, 'find' | 'namesOf' | 'record'>;
  operations: Pick<
    OperationsService,
    'start' | 'begin' | 'waitUntil' | 'complete' | 'fail' | 'find' | 'isOpenFor'
  >;
  certificates: Pick<CertificatesService, 'storeIssued'>;
  driver: Pick<HostingDriver, 'estimateSeconds' | 'issueCertificate'>;
  /**
   * Issue 21: ordered certificates are renewed (the local driver's, from a real ACME CA); the
   * simulated CA's are not.
   */
  renewOrdered: boolean;
}

const DAY_MS = 86_400_000;

/**
 * When an ordered certificate is ordered again: 30 days before it expires, or a third of its
 * lifetime before when that is shorter (Let's Encrypt's advice for 90-day certificates: at 60 days).
 */
export function renewalTime(notBefore: Date, notAfter: Date): Date {
  const lifetime = notAfter.getTime() - notBefore.getTime();
  return new Date(notAfter.getTime() - Math.min(30 * DAY_MS, Math.max(0, lifetime) / 3));
}

/** The due row of a domain's renewal: one per install and domain, moved by every completed order. */
const renewalKey = (installId: string, domainId: string) => `renew_certificate:${installId}:${domainId}`;

export function createCertificateOrders(deps: CertificateOrdersDeps) {
  const { db, installs, domains, operations, certificates, driver, renewOrdered } = deps;

  /** createDomainCertificateOrder: an order_certificate operation and its job; 202. */
  async function order(caller: Caller, installId: string, domainId: string, input: CertificateOrderInput) {
    await installs.requireInstall(caller, installId, 'installs:operate');
    const { domain } = await domains.find(caller, installId, domainId);
    return withTransaction(db, async (tx) => {
      const install = await installs.lock(tx, installId);
      if (!install) throw Errors.notFound();
      return operations.start(tx, {
        install,
        type: 'order_certificate',
        resource: { type: 'domain', id: domain.id },
        // The holder is mailed when the order is fulfilled or refused.
        input: { domain_name: domain.name, notification_emails: [input.email_address], holder: input },
        expectedSeconds: driver.estimateSeconds('issue_certificate'),
      });
    });
  }

  /**
   * The certificate-order job. Like a public CA, the platform issues only for a domain whose
   * ownership is proven: an unverified (or deleted) domain fails the order, with the reason.
   */
  const run: JobHandler<{ operation_id: string }> = {
    async run({ operation_id }, ctx) {
      const op = await operations.begin(operation_id);
      // Orders are always of an install (install_id is null only for site-level work).
      if (!op?.install_id) return;
      const install = await installs.findById(op.install_id);
      if (!install) return;
      const name = inputOf(op, 'order_certificate').domain_name;
      const domain = await domains.record(op.install_id, op.resource_id);
      if (domain?.ownership_status !== 'TXT_VERIFIED') {
        const why = domain
          ? `domain ${name} is not verified yet: verify its TXT record, then order again`
          : `domain ${name} no longer exists on install ${install.name}`;
        await operations.fail(op.id, `The certificate order was refused: ${why}`, async () => undefined);
        return;
      }
      let result: Awaited<ReturnType<typeof driver.issueCertificate>>;
      try {
        result = await driver.issueCertificate(
          { key: op.id, signal: ctx.signal },
          { install: installRef(install), names: [name] },
        );
      } catch (err) {
        // A refusal a retry cannot change (the CA found the challenge invalid) ends the order now.
        if (!(err instanceof DriverError && err.final)) throw err;
        await operations.fail(op.id, `The certificate order failed: ${err.message}`, async () => undefined);
        return;
      }
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      const names = await domains.namesOf(install.id);
      await operations.complete(op.id, async (tx) => {
        const cert = await certificates.storeIssued(tx, install.id, result.value, names);
        if (renewOrdered && domain)
          await rescheduleAt(
            tx,
            renewalKey(install.id, domain.id),
            'renew_certificate',
            { order_id: op.id },
            renewalTime(cert.not_before, cert.not_after),
          );
        return {
          details: [
            ['Domain', name],
            ['Certificate', `${cert.subject}, issued by ${cert.issuer}`],
            ['Valid until', cert.not_after.toISOString()],
          ],
        };
      });
    },
    async exhausted({ operation_id }, error) {
      await operations.fail(operation_id, `The certificate order failed: ${error}`, async () => undefined);
    },
  };

  /**
   * Issue 21, renewal: the completed order's domain ordered again with the same input, unless the
   * domain or the install is gone, or an order of that domain is already open (it renews it). Run
   * twice, the second run finds the first's order open (or newer) and starts nothing.
   */
  const renew: JobHandler<{ order_id: string }> = {
    async run({ order_id }) {
      const previous = await operations.find(order_id);
      if (!previous?.install_id || previous.type !== 'order_certificate' || !previous.resource_id) return;
      const installId = previous.install_id;
      const domain = await domains.record(installId, previous.resource_id);
      if (!domain) return;
      if (await operations.isOpenFor(installId, 'order_certificate', domain.id)) return;
      await withTransaction(db, async (tx) => {
        const install = await installs.lock(tx, installId);
        if (!install) return;
        await operations.start(tx, {
          install,
          type: 'order_certificate',
          resource: { type: 'domain', id: domain.id },
          input: inputOf(previous, 'order_certificate'),
          expectedSeconds: driver.estimateSeconds('issue_certificate'),
        });
      });
    },
    // Nothing to show: no operation was started. The certificate stays until its expiry.
    async exhausted() {},
  };

  return { order, job: run, renewJob: renew };
}
