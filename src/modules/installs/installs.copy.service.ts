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

/** copyInstall: POST /v1/install_copy (C1-C6). */
export function createInstallCopyService({ db, installs, operations, driver }: InstallCopyDeps) {
  return {
    async copy(caller: Caller, body: Static<typeof CopyInstallBody>) {
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
      // Both must be visible (404 otherwise); the destination is the one acted on.
      await installs.requireInstall(caller, sourceId, 'installs:read');
      const visibleDestination = await installs.requireInstall(caller, destinationId, 'installs:operate');
      return withTransaction(db, async (tx) => {
        // Locked in id order, so two copies in opposite directions cannot deadlock.
        const [first, second] = [sourceId, destinationId].sort();
        const locked = new Map<string, InstallRow | null>();
        for (const id of [first, second]) if (id) locked.set(id, await installs.lock(tx, id));
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
          include_files: includeFiles,
          include_db: includeDb,
          // C3: without db_tables, the whole database.
          db_tables: options.db_tables ?? null,
          notification_emails: body.notification_emails ?? [],
        };
        return operations.start(tx, {
          install: visibleDestination,
          type: 'copy_install',
          resource: { type: 'install', id: destination.id },
          input,
          expectedSeconds: driver.estimateSeconds('copy'),
        });
      });
    },
  };
}

export type InstallCopyService = ReturnType<typeof createInstallCopyService>;
