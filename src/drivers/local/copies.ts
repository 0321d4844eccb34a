import fs from 'node:fs/promises';
import path from 'node:path';
import type { CallContext, CopyRequest, HostingDriver } from '../driver.js';
import type { LocalContext } from './context.js';
import type { Trigger } from './database.js';
import * as files from './files.js';
import { databaseNames, pathsOf, stagingDir } from './names.js';
import { discardStaging, recover, stageDatabase, swapStaged } from './staging.js';

/**
 * C1-C5: a copy overwrites the destination with the source's document root and/or database tables
 * (all, or the named ones that exist). The source's tree and the dump of its tables are staged under
 * the destination's names first; the destination changes only in the swap at the end (staging.ts).
 */
export function copyOperations(ctx: LocalContext): Pick<HostingDriver, 'copy'> {
  const { mariadb, hostingRoot, midway, once } = ctx;

  /** A copy's slow part, in staging: the source's document root and the dump of its tables, loaded. */
  async function stageCopy(input: CopyRequest, staging: string, signal: AbortSignal) {
    const { source, destination } = input;
    const from = pathsOf(hostingRoot, source.id);
    const sourceDb = databaseNames(source.id).db;
    const sourceTables = Object.keys(await mariadb.tablesOf(sourceDb));
    // C3: only tables that exist in the source (a named table that does not is skipped).
    const tables = input.db_tables === null ? null : input.db_tables.filter((t) => sourceTables.includes(t));
    if (input.include_files) {
      await fs.cp(from.public, path.join(staging, 'public'), { recursive: true });
      // The destination keeps its own wp-config.php (its database credentials) and is its user's.
      await ctx.web?.adopt(destination.id, path.join(staging, 'public'), signal);
    }
    const dbWork = input.include_db && (tables === null || tables.length > 0);
    let triggers: Trigger[] = [];
    if (dbWork) {
      const dump = path.join(staging, 'database.sql');
      // The source's triggers from its catalogue, not from the dump (decisions.md #136): a trigger
      // made with a qualified name is dumped with it, and would load into the source's database.
      await mariadb.dump(sourceDb, dump, signal, tables, false);
      triggers = await mariadb.triggersOf(sourceDb, tables ?? sourceTables);
      await stageDatabase(ctx, destination.id, dump, signal, 'copy');
      // C1-C4 (issue 21): the copied rows point at the destination, before they are swapped in.
      await ctx.web?.rewriteUrls(source, destination, signal);
    }
    await midway('copy', signal);
    return { dbWork, tables, triggers };
  }

  return {
    copy: (call: CallContext, input: CopyRequest) =>
      once(
        'copy',
        call,
        [input.destination.id, input.source.id].filter((v, i, a) => a.indexOf(v) === i),
        async () => {
          const { source, destination } = input;
          await recover(ctx, source.id);
          await recover(ctx, destination.id);
          const to = pathsOf(hostingRoot, destination.id);
          const staging = stagingDir(hostingRoot, destination.id, call.key);
          await files.remove(staging);
          await fs.mkdir(staging, { recursive: true });
          const staged = await stageCopy(input, staging, call.signal).catch(async (err) => {
            await discardStaging(ctx, destination.id, staging);
            throw err;
          });
          // Issue 28 finding 7: tables then files, all or nothing (staging.ts).
          const copied = await swapStaged(
            ctx,
            destination.id,
            {
              operation: 'copy',
              key: call.key,
              staging,
              tree: input.include_files ? path.join(staging, 'public') : null,
              tables: staged.dbWork ? { only: staged.tables, triggers: staged.triggers } : null,
            },
            call.signal,
          );
          // Issue 21: the destination's page cache holds pages of before the copy.
          await ctx.web?.purgePage(destination.id);
          return {
            wp_version: input.include_files ? await files.readWpVersion(to.public) : destination.wp_version,
            copied_tables: copied,
          };
        },
        true,
      ),
  };
}
