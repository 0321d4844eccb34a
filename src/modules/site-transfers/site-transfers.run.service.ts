import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { Outbox } from '../../mail/outbox.js';
import { siteTransferFinishedMail } from '../../mail/templates/site-transfer-finished.js';
import type { OperationRow, Outcome } from '../operations/operations.service.js';
import { destinationProblem, STARTABLE, siteProblem } from './eligibility.js';
import * as repo from './site-transfers.repo.js';

export interface SiteTransferRunDeps {
  db: Db;
  clock: Clock;
  outbox: Pick<Outbox, 'add'>;
}

/** The operation's details for a transfer (T10: the names as they were requested). */
export const transferDetails = (t: repo.TransferRow): [string, string][] => [
  ['Site', t.site_name],
  ['From account', t.origin_account_name],
  ['To account', t.destination_account_name],
];

/**
 * Running a transfer: the steps of the transfer_site job (site-transfers.jobs.ts), each in the
 * caller's transaction or alone. Requesting, listing and cancelling are in site-transfers.service.ts.
 */
export function createSiteTransferRunService({ db, clock, outbox }: SiteTransferRunDeps) {
  /** The notification to both accounts' owners, in the transaction that ends the transfer. */
  async function mailOwners(tx: Db, transfer: repo.TransferRow, op: OperationRow, error: string | null) {
    const status = transfer.status as 'completed' | 'failed';
    const mail = siteTransferFinishedMail({ transfer, status, error, finishedAt: clock.now() });
    const emails = await repo.ownerEmails(tx, [transfer.origin_account_id, transfer.destination_account_id]);
    await outbox.add(
      tx,
      emails.map((to) => ({ operation_id: op.id, event: `transfer_site.${status}`, to, ...mail })),
    );
  }

  return {
    find: (transferId: string, tx: Db = db) => repo.findTransfer(tx, transferId),

    /** pending/scheduled -> in_progress (T9); with maintenance_mode the installs show it. */
    async start(tx: Db, transferId: string) {
      const transfer = await repo.lockTransfer(tx, transferId);
      if (!transfer || !STARTABLE.has(transfer.status)) return null;
      if (transfer.maintenance_mode) await repo.setMaintenance(tx, transfer.site_id, true);
      return repo.updateTransfer(tx, transferId, { status: 'in_progress', updated_at: clock.now() });
    },

    /** Run-time check: the rules may have changed since the request (an operator, a deletion). */
    async problemAtRun(transfer: repo.TransferRow): Promise<string | null> {
      return withTransaction(db, async (tx) => {
        const site = await repo.lockSiteRow(tx, transfer.site_id);
        if (!site) return `Site ${transfer.site_id} no longer exists`;
        if (site.account_id !== transfer.origin_account_id) {
          return `Site ${transfer.site_id} is no longer in account ${transfer.origin_account_id}`;
        }
        const destination = await repo.findAccountRow(tx, transfer.destination_account_id);
        return siteProblem(site) ?? destinationProblem(destination, transfer.destination_account_id);
      });
    },

    installIdsOf: (siteId: string) => repo.installIdsOfSite(db, siteId),

    /** T11: the move, the completed status and the owners' mails in the operation's transaction. */
    async finish(tx: Db, transferId: string, op: OperationRow): Promise<Outcome> {
      const transfer = await repo.lockTransfer(tx, transferId);
      if (transfer?.status !== 'in_progress') return {};
      await repo.moveSite(tx, {
        siteId: transfer.site_id,
        destinationAccountId: transfer.destination_account_id,
      });
      const done = await repo.updateTransfer(tx, transferId, {
        status: 'completed',
        updated_at: clock.now(),
      });
      await mailOwners(tx, done, op, null);
      return { details: transferDetails(done) };
    },

    /** failed (T9): nothing moved, maintenance off, the owners told. */
    async markFailed(tx: Db, transferId: string, op: OperationRow, error: string): Promise<Outcome> {
      const transfer = await repo.lockTransfer(tx, transferId);
      if (!transfer || !['pending', 'scheduled', 'in_progress'].includes(transfer.status)) return {};
      await repo.setMaintenance(tx, transfer.site_id, false);
      const failed = await repo.updateTransfer(tx, transferId, { status: 'failed', updated_at: clock.now() });
      await mailOwners(tx, failed, op, error);
      return { details: transferDetails(failed) };
    },
  };
}

export type SiteTransferRunService = ReturnType<typeof createSiteTransferRunService>;
