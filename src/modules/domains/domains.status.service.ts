import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import type { JobHandler } from '../../jobs/catalog.js';
import type { JobQueue } from '../../jobs/queue.js';
import type { InstallsService } from '../installs/installs.service.js';
import { checkPointing, type DomainStatus, dnsFailure, type StatusResolver } from './dns-status.js';
import * as domainsRepo from './domains.repo.js';
import * as repo from './domains.status.repo.js';

/** The reference's limit: one status check every 5 seconds for each install. */
export const CHECK_STATUS_INTERVAL_SECONDS = 5;

export interface DomainStatusDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall' | 'lock' | 'findById'>;
  queue: Pick<JobQueue, 'enqueue'>;
  resolver: StatusResolver;
  installDomain: string;
}

export function createDomainStatusService(deps: DomainStatusDeps) {
  const { db, clock, installs, queue } = deps;

  return {
    /** checkStatus: a pending report and its job, in one transaction; 429 within 5 s of the last one. */
    async request(caller: Caller, installId: string, domainId: string) {
      await installs.requireInstall(caller, installId, 'installs:operate');
      return withTransaction(db, async (tx) => {
        const install = await installs.lock(tx, installId);
        if (!install) throw Errors.notFound();
        const domain = await domainsRepo.findDomain(tx, installId, domainId);
        if (!domain) throw Errors.notFound();
        const now = clock.now();
        const last = await repo.latestReport(tx, installId);
        const wait = last
          ? Math.ceil(
              (last.created_at.getTime() + CHECK_STATUS_INTERVAL_SECONDS * 1000 - now.getTime()) / 1000,
            )
          : 0;
        if (wait > 0) {
          throw Errors.tooManyRequests(
            `Domain status checks are rate-limited to one request every ${CHECK_STATUS_INTERVAL_SECONDS} seconds for each install; retry in ${wait} seconds`,
            wait,
          );
        }
        const report = await repo.insertReport(tx, {
          install_id: installId,
          domain_id: domain.id,
          domain_name: domain.name,
          created_at: now,
        });
        await queue.enqueue(tx, 'domain-status-check', { report_id: report.id });
        return report;
      });
    },

    /** getDomainReportStatus: a report of the install (404 for another install's report). */
    async get(caller: Caller, installId: string, reportId: string) {
      const install = await installs.requireInstall(caller, installId, 'installs:read');
      const report = await repo.findReport(db, reportId);
      if (!report || report.install_id !== installId) throw Errors.notFound();
      return { install, report, result: report.result as DomainStatus | null };
    },
  };
}

/** The domain-status-check job: the DNS lookups, retried on failure, a dns_error status at the end. */
export function createDomainStatusJobs(deps: DomainStatusDeps) {
  const { db, clock, installs, resolver, installDomain } = deps;
  const check: JobHandler<{ report_id: string }> = {
    async run({ report_id }) {
      const report = await repo.findReport(db, report_id);
      if (!report || report.completed_at) return;
      const install = await installs.findById(report.install_id);
      if (!install) return;
      const status = await checkPointing(resolver, report.domain_name, {
        name: install.name,
        cname: `${install.name}.${installDomain}`,
        stable_ips: install.server_ipv4 ?? install.stable_ips ?? [],
      });
      await repo.completeReport(db, report.id, status, clock.now());
    },
    async exhausted({ report_id }) {
      const report = await repo.findReport(db, report_id);
      if (!report || report.completed_at) return;
      const install = await installs.findById(report.install_id);
      await repo.completeReport(
        db,
        report.id,
        dnsFailure(report.domain_name, install?.name ?? ''),
        clock.now(),
      );
    },
  };
  return { check };
}

export type DomainStatusService = ReturnType<typeof createDomainStatusService>;
