import { type Caller, can, requireAccount } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { sqlState } from '../../db/errors.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import type { HostingDriver } from '../../drivers/driver.js';
import { AppError, Errors, type FieldError } from '../../errors.js';
import { cancelDue } from '../../jobs/due.js';
import type { Outbox } from '../../mail/outbox.js';
import type { OperationsService } from '../operations/operations.service.js';
import type { SitesService } from '../sites/sites.service.js';
import { destinationProblem, STARTABLE, siteProblem } from './eligibility.js';
import { checkScheduledTime, type ScheduleProblem } from './scheduled-time.js';
import * as repo from './site-transfers.repo.js';
import { createSiteTransferRunService, transferDetails } from './site-transfers.run.service.js';

export type { TransferRow } from './site-transfers.repo.js';

export interface SiteTransfersDeps {
  db: Db;
  clock: Clock;
  sites: Pick<SitesService, 'requireSite'>;
  operations: Pick<OperationsService, 'start' | 'failWithin'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
  outbox: Pick<Outbox, 'add'>;
}

export interface CreateTransferInput {
  destination_account_id: string;
  scheduled_time?: string | null;
  maintenance_mode?: boolean;
}

/** The DELETE conflict text, exactly as the reference gives it (T9). */
export const ALREADY_STARTED = 'Transfer has already started and cannot be cancelled';

const SCHEDULE_MESSAGES: Record<ScheduleProblem, string> = {
  format: 'scheduled_time must be an RFC 3339 date-time with an offset, e.g. 2026-06-01T14:30:00Z',
  too_soon: 'scheduled_time must be more than 1 hour in the future',
  too_late: 'scheduled_time must be less than 7 days in the future',
};

/** T8: a transfer parameter that fails validation is a 422 with one field error (G7). */
function unprocessable(field: string, type: FieldError['type'], code: string, message: string) {
  return Errors.unprocessable(message, [{ resource: 'site_transfer', field, type, code, message }]);
}

const activeConflict = (siteId: string) =>
  Errors.conflict(`Site ${siteId} already has an active transfer; cancel it or wait for it to finish`);

/**
 * Requesting, listing and cancelling transfers (T1-T10) here; the steps of the transfer_site job in
 * site-transfers.run.service.ts, assembled into the one service the routes and the job call.
 */
export function createSiteTransfersService(deps: SiteTransfersDeps) {
  const { db, clock, sites, operations, driver } = deps;
  const run = createSiteTransferRunService(deps);

  async function visibleTransfer(caller: Caller, siteId: string, transferId: string) {
    await sites.requireSite(caller, siteId, 'transfers:manage');
    const transfer = await repo.findTransfer(db, transferId);
    if (!transfer || transfer.site_id !== siteId) throw Errors.notFound();
    return transfer;
  }

  /** T2, T3, T6, T8: what can be decided from the caller and the body alone. */
  function checkRequest(caller: Caller, originAccountId: string, input: CreateTransferInput) {
    const destinationId = input.destination_account_id;
    const destination = caller.memberships.get(destinationId);
    if (!destination) {
      throw unprocessable(
        'destination_account_id',
        'access_error',
        'destination_not_accessible',
        `Account ${destinationId} does not exist or is not accessible`,
      );
    }
    if (!can(destination, 'transfers:manage')) throw Errors.forbidden();
    if (destinationId === originAccountId) {
      throw unprocessable(
        'destination_account_id',
        'invalid_value',
        'same_account',
        `Site is already in account ${destinationId}; the destination account must differ from the origin`,
      );
    }
    if (input.scheduled_time === undefined || input.scheduled_time === null) return null;
    const checked = checkScheduledTime(input.scheduled_time, clock.now());
    if ('problem' in checked) {
      throw unprocessable(
        'scheduled_time',
        'invalid_value',
        `scheduled_time_${checked.problem}`,
        SCHEDULE_MESSAGES[checked.problem],
      );
    }
    return checked.at;
  }

  /** T4, T5, T7 in the transaction (the site locked): what the transfer needs; nothing written. */
  async function check(tx: Db, siteId: string, originId: string, input: CreateTransferInput) {
    const site = await repo.lockSiteRow(tx, siteId);
    if (!site || site.account_id !== originId) throw Errors.notFound();
    const problem = siteProblem(site);
    if (problem) throw Errors.conflict(problem);
    const destination = await repo.findAccountRow(tx, input.destination_account_id);
    const ineligible = destinationProblem(destination, input.destination_account_id);
    if (ineligible || !destination)
      throw Errors.conflict(ineligible ?? 'Destination account is not eligible');
    if (await repo.activeOfSite(tx, siteId)) throw activeConflict(siteId);
    return { site, destination, installNames: await repo.installNamesOfSite(tx, siteId) };
  }

  async function insert(
    tx: Db,
    siteId: string,
    originId: string,
    input: CreateTransferInput,
    at: Date | null,
  ) {
    const { site, destination, installNames } = await check(tx, siteId, originId, input);
    const origin = await repo.findAccountRow(tx, originId);
    const now = clock.now();
    const transfer = await repo.insertTransfer(tx, {
      site_id: siteId,
      origin_account_id: originId,
      destination_account_id: destination.id,
      status: at ? 'scheduled' : 'pending',
      // T10: the names as they are now.
      site_name: site.name,
      install_names: installNames,
      origin_account_name: origin?.name ?? originId,
      destination_account_name: destination.name,
      scheduled_time: at,
      maintenance_mode: input.maintenance_mode ?? false,
      created_at: now,
      updated_at: now,
    });
    const wait = at ? Math.ceil((at.getTime() - now.getTime()) / 1000) : 0;
    // G10: immediate work is queued now; scheduled work is due work, so it survives restarts and
    // follows the (manual) clock.
    const operation = await operations.start(
      tx,
      {
        install: { id: null, account_id: originId },
        type: 'transfer_site',
        resource: { type: 'site_transfer', id: transfer.id },
        input: { site_id: siteId, destination_account_id: destination.id },
        expectedSeconds: wait + driver.estimateSeconds('move_site'),
      },
      at ?? undefined,
    );
    const row = await repo.updateTransfer(tx, transfer.id, { operation_id: operation.id });
    return { transfer: row, operation };
  }

  return {
    /** T2-T8: a pending (immediate) or scheduled transfer and its operation. */
    async create(caller: Caller, siteId: string, input: CreateTransferInput) {
      const site = await sites.requireSite(caller, siteId, 'transfers:manage');
      const at = checkRequest(caller, site.account_id, input);
      try {
        return await withTransaction(db, (tx) => insert(tx, siteId, site.account_id, input, at));
      } catch (err) {
        // T7: the partial unique index is the last word when two requests race past the check.
        if (!(err instanceof AppError) && sqlState(err)?.code === '23505') throw activeConflict(siteId);
        throw err;
      }
    },

    /** Issue 22, `?dry_run=true`: the checks of `create` (in a transaction that writes nothing) and what it would do. */
    async createDryRun(caller: Caller, siteId: string, input: CreateTransferInput) {
      const site = await sites.requireSite(caller, siteId, 'transfers:manage');
      const at = checkRequest(caller, site.account_id, input);
      const { destination, installNames } = await withTransaction(db, (tx) =>
        check(tx, siteId, site.account_id, input),
      );
      return {
        dry_run: true as const,
        operation: 'transfer_site' as const,
        site_id: siteId,
        origin_account_id: site.account_id,
        destination_account_id: destination.id,
        status: at ? ('scheduled' as const) : ('pending' as const),
        scheduled_time: at?.toISOString() ?? null,
        maintenance_mode: input.maintenance_mode ?? false,
        install_names: installNames,
      };
    },

    /** T1: the transfers initiated from the account; owner or full,billing (A3). */
    async listForAccount(caller: Caller, accountId: string, page: Page) {
      requireAccount(caller, accountId, 'transfers:manage');
      return repo.listOfAccount(db, accountId, page);
    },

    async listForSite(caller: Caller, siteId: string, page: Page) {
      await sites.requireSite(caller, siteId, 'transfers:manage');
      return repo.listOfSite(db, siteId, page);
    },

    get: visibleTransfer,

    /** T9: 204 before the transfer starts; 409 once it has. Cancelling twice is still a 204. */
    async cancel(caller: Caller, siteId: string, transferId: string) {
      await visibleTransfer(caller, siteId, transferId);
      await withTransaction(db, async (tx) => {
        const transfer = await repo.lockTransfer(tx, transferId);
        if (!transfer) throw Errors.notFound();
        if (transfer.status === 'cancelled') return;
        if (!STARTABLE.has(transfer.status)) throw Errors.conflict(ALREADY_STARTED);
        await repo.updateTransfer(tx, transferId, { status: 'cancelled', updated_at: clock.now() });
        if (!transfer.operation_id) return;
        await cancelDue(tx, `operation:${transfer.operation_id}`);
        await operations.failWithin(
          tx,
          transfer.operation_id,
          'The site transfer was cancelled',
          async () => ({
            details: transferDetails(transfer),
          }),
        );
      });
    },

    // For the job handler (site-transfers.jobs.ts).
    ...run,
  };
}

export type SiteTransfersService = ReturnType<typeof createSiteTransfersService>;
