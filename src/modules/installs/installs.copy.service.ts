import type { Static } from 'typebox';
import type { Caller } from '../../auth/access.js';
import type { Db } from '../../db/client.js';
import { withTransaction } from '../../db/transaction.js';
import type { HostingDriver } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { OperationInput, OperationsService } from '../operations/operations.service.js';
import type { CopyInstallBody } from './installs.copy.schemas.js';
import type { InstallRow } from './installs.repo.js';
import type { InstallsService } from './installs.service.js';

export interface InstallCopyDeps {
  db: Db;
  installs: Pick<InstallsService, 'requireInstall' | 'lock'>;
  operations: Pick<OperationsService, 'start' | 'assertIdle'>;
  driver: Pick<HostingDriver, 'estimateSeconds'>;
}

type CopyBody = Static<typeof CopyInstallBody>;

/** C4, C5 and "not onto itself": what can be decided from the body alone. */
function checkBody(body: CopyBody) {
  const { source_environment_id: sourceId, destination_environment_id: destinationId } = body;
  if (sourceId === destinationId) {
    throw Errors.invalidValue(
      'install_copy',
      'destination_environment_id',
      'destination_environment_id must name another install than source_environment_id',
    );
  }
  const options = body.custom_options ?? {};
  // C5: both default to true.
  const includeFiles = options.include_files ?? true;
  const includeDb = options.include_db ?? true;
  if (options.db_tables && !includeDb) {
    // C4
    throw Errors.invalidValue(
      'install_copy',
      'custom_options.db_tables',
      'custom_options.db_tables cannot be given when custom_options.include_db is false',
    );
  }
  if (!includeFiles && !includeDb) {
    throw Errors.invalidValue(
      'install_copy',
      'custom_options',
      'custom_options.include_files and include_db are both false: there is nothing to copy',
    );
  }
  return { sourceId, destinationId, includeFiles, includeDb, dbTables: options.db_tables ?? null };
}

/** copyInstall: POST /v1/install_copy (C1-C6). */
export function createInstallCopyService({ db, installs, operations, driver }: InstallCopyDeps) {
  /** The checks before the transaction: the body, and both installs visible (404 otherwise). */
  async function prepare(caller: Caller, body: CopyBody) {
    const checked = checkBody(body);
    await installs.requireInstall(caller, checked.sourceId, 'installs:read');
    // The destination is the one acted on.
    const install = await installs.requireInstall(caller, checked.destinationId, 'installs:operate');
    return { ...checked, install, emails: body.notification_emails ?? [] };
  }

  /**
   * The checks in the transaction, both installs locked in id order (two copies in opposite
   * directions cannot deadlock): the copy's operation input. Nothing is written.
   */
  async function check(tx: Db, request: Awaited<ReturnType<typeof prepare>>) {
    const { sourceId, destinationId } = request;
    const locked = new Map<string, InstallRow | null>();
    for (const id of [sourceId, destinationId].sort()) locked.set(id, await installs.lock(tx, id));
    const source = locked.get(sourceId);
    const destination = locked.get(destinationId);
    if (!source || !destination) throw Errors.notFound();
    if (source.account_id !== destination.account_id) {
      // C1
      throw Errors.invalidValue(
        'install_copy',
        'destination_environment_id',
        `Install ${destination.name} is not on the account of install ${source.name}; both must be on one account`,
      );
    }
    await operations.assertIdle(tx, source, 'read', 'source_environment_id');
    await operations.assertIdle(tx, destination, 'write', 'destination_environment_id');
    const input: OperationInput<'copy_install'> = {
      source_install_id: source.id,
      include_files: request.includeFiles,
      include_db: request.includeDb,
      // C3: without db_tables, the whole database.
      db_tables: request.dbTables,
      notification_emails: request.emails,
    };
    return input;
  }

  return {
    async copy(caller: Caller, body: CopyBody) {
      const request = await prepare(caller, body);
      return withTransaction(db, async (tx) => {
        const input = await check(tx, request);
        return operations.start(tx, {
          install: request.install,
          type: 'copy_install',
          resource: { type: 'install', id: request.destinationId },
          input,
          expectedSeconds: driver.estimateSeconds('copy'),
        });
      });
    },

    /** Issue 22, `?dry_run=true`: the checks of `copy` (in a transaction that writes nothing) and what it would do. */
    async copyDryRun(caller: Caller, body: CopyBody) {
      const request = await prepare(caller, body);
      const input = await withTransaction(db, (tx) => check(tx, request));
      return {
        dry_run: true as const,
        operation: 'copy_install' as const,
        source_install_id: input.source_install_id,
        destination_install_id: request.destinationId,
        include_files: input.include_files,
        include_db: input.include_db,
        db_tables: input.db_tables,
        notification_emails: input.notification_emails,
        expected_seconds: driver.estimateSeconds('copy'),
      };
    },
  };
}

export type InstallCopyService = ReturnType<typeof createInstallCopyService>;
