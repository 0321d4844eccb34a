import type { Caller } from '../../auth/access.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { type HostingDriver, installRef } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { JobHandler } from '../../jobs/catalog.js';
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
  operations: Pick<OperationsService, 'start' | 'begin' | 'waitUntil' | 'complete' | 'fail'>;
  certificates: Pick<CertificatesService, 'storeIssued'>;
  driver: Pick<HostingDriver, 'estimateSeconds' | 'issueCertificate'>;
}

export function createCertificateOrders(deps: CertificateOrdersDeps) {
  const { db, installs, domains, operations, certificates, driver } = deps;

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
      const result = await driver.issueCertificate(
        { key: op.id, signal: ctx.signal },
        { install: installRef(install), names: [name] },
      );
      if (!result.done) return operations.waitUntil(op, result.checkAt);
      const names = await domains.namesOf(install.id);
      await operations.complete(op.id, async (tx) => {
        const cert = await certificates.storeIssued(tx, install.id, result.value, names);
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

  return { order, job: run };
}
