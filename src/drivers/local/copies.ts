import fs from 'node:fs/promises';
import path from 'node:path';
import type { CallContext, CopyRequest, HostingDriver, Snapshot } from '../driver.js';
import { removeImported, verifiedBackupAt } from './backups.js';
import type { LocalContext } from './context.js';
import type { Trigger } from './database.js';
import * as files from './files.js';
import { accountOf } from './installs.js';
import { databaseNames, pathsOf, stagingDir } from './names.js';
import { discardOnFailure, recover, stageDatabase, swapStaged } from './staging.js';
import * as tenant from './tenant.js';

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
      // Issue 28: `tar` as the source's owner piped into `tar` as the destination's (tenant.ts): root
      // follows nothing in either tree, and the copy is the destination owner's from the start.
      const live = pathsOf(hostingRoot, destination.id).public;
      const owner = (await tenant.ownerOf(live)) ?? tenant.ROOT;
      const tree = path.join(staging, 'public');
      await tenant.makeTreeDir(tree, owner);
      await tenant.copyTree(
        { owner: (await tenant.ownerOf(from.public)) ?? tenant.ROOT, dir: from.public },
        { owner, dir: tree },
        'copy',
        signal,
      );
      // The destination keeps its own wp-config.php (its database credentials).
      await ctx.web?.adopt(destination.id, tree, await accountOf(ctx, destination.id), signal);
      await tenant.settleTreeDir(tree, (await fs.lstat(live).catch(() => null))?.mode ?? 0o750);
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
      await ctx.web?.rewriteUrls(source, destination, signal, input.source_names);
    }
    await midway('copy', signal);
    return { dbWork, tables, triggers };
  }

  /**
   * Issue 30: a copy from an install on another hosting server: its backup, imported here (the agent
   * fetched its archive, backups.ts importBackup) and checked, is staged like a restore's (the tree
   * extracted by the destination's owner, the dump loaded in staging), then the same URL rewrite.
   */
  async function stageFromSnapshot(
    input: CopyRequest,
    snapshot: Snapshot,
    staging: string,
    signal: AbortSignal,
  ) {
    const { source, destination } = input;
    const backup = await verifiedBackupAt(hostingRoot, snapshot);
    const sourceTables = Object.keys(snapshot.db_tables);
    const tables = input.db_tables === null ? null : input.db_tables.filter((t) => sourceTables.includes(t));
    if (input.include_files) {
      const live = pathsOf(hostingRoot, destination.id).public;
      const owner = (await tenant.ownerOf(live)) ?? tenant.ROOT;
      const tree = path.join(staging, 'public');
      await tenant.makeTreeDir(tree, owner);
      await tenant.extractArchive(owner, backup.archive, tree, 'copy', signal);
      await ctx.web?.adopt(destination.id, tree, await accountOf(ctx, destination.id), signal);
      await tenant.settleTreeDir(tree, (await fs.lstat(live).catch(() => null))?.mode ?? 0o750);
    }
    const dbWork = input.include_db && (tables === null || tables.length > 0);
    let triggers: Trigger[] = [];
    if (dbWork) {
      triggers = await stageDatabase(ctx, destination.id, backup.dump, signal, 'copy');
      if (tables !== null) {
        // C3: the dump holds every table; only those asked are swapped in.
        const staged = databaseNames(destination.id).staging;
        await mariadb.dropTables(
          staged,
          Object.keys(await mariadb.tablesOf(staged)).filter((t) => !tables.includes(t)),
        );
        triggers = triggers.filter((t) => tables.includes(t.table));
      }
      await ctx.web?.rewriteUrls(source, destination, signal, input.source_names);
    }
    await midway('copy', signal);
    return { dbWork, tables, triggers };
  }

  return {
    copy: (call: CallContext, input: CopyRequest) => copyOnce(call, input),
  };

  function copyOnce(call: CallContext, input: CopyRequest) {
    const remote = input.source_snapshot ?? null;
    return once(
      'copy',
      call,
      // Issue 30: a source on another server is not this server's to lock or recover.
      (remote ? [input.destination.id] : [input.destination.id, input.source.id]).filter(
        (v, i, a) => a.indexOf(v) === i,
      ),
      async () => {
        const { source, destination } = input;
        if (!remote) await recover(ctx, source.id, call.signal);
        await recover(ctx, destination.id, call.signal);
        const to = pathsOf(hostingRoot, destination.id);
        const staging = stagingDir(hostingRoot, destination.id, call.key);
        await files.remove(staging, call.signal);
        // Root's (the dump is root-only); the staged tree inside it is the destination owner's.
        await tenant.rootDir(path.dirname(staging));
        await tenant.rootDir(staging);
        const staged = await discardOnFailure(ctx, destination.id, staging, () =>
          remote
            ? stageFromSnapshot(input, remote, staging, call.signal)
            : stageCopy(input, staging, call.signal),
        );
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
        if (remote) await removeImported(hostingRoot, remote);
        return {
          wp_version: input.include_files
            ? await files.readWpVersion(to.public, call.signal)
            : destination.wp_version,
          copied_tables: copied,
        };
      },
      true,
    );
  }
}
