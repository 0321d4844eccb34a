import fs from 'node:fs/promises';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { SecretBox } from '../../secrets.js';
import {
  type CallContext,
  DriverError,
  type DriverOperation,
  type HostingDriver,
  type InstallRef,
  type RoutingRequest,
  type TrafficDay,
} from '../driver.js';
import { type AcmeConfig, createAcmeIssuer } from './acme.js';
import { backupOperations } from './backups.js';
import type { LocalContext } from './context.js';
import { copyOperations } from './copies.js';
import type { MariaDb } from './database.js';
import * as files from './files.js';
import { accountOf, installOperations, reconcileDatabases } from './installs.js';
import * as repo from './local.repo.js';
import { secureLayout } from './modes.js';
import { databaseNames, pathsOf } from './names.js';
import { signInOperations } from './sign-in.js';
import { createSshd, type Sshd, type SshdConfig } from './sshd.js';
import { createTaskRunner } from './tasks.js';
import { createWebTier, type WebConfig } from './web.js';

export interface LocalDriverDeps {
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  mariadb: MariaDb;
  /** HOSTING_ROOT: installs/, backups/ and staging/ live under it. */
  hostingRoot: string;
  /** LOCAL_MAX_HEAVY_OPERATIONS: backups, restores and copies running at once in this process. */
  maxHeavy: number;
  /** LOCAL_WEB=on (issue 21): installs are served by nginx and PHP-FPM with WordPress installed. */
  web?: WebConfig | null;
  /** Issue 31: SSH_PORT set: Hostplane's own sshd serves SFTP to the installs (sshd.ts). */
  ssh?: SshdConfig | null;
  /** Issue 21: certificate orders through ACME (acme.ts), answered over HTTP-01 by the web tier. */
  acme: AcmeConfig;
  /**
   * Test mode (HOSTPLANE_FAULTS=on): called half-way through a backup, restore or copy (its staging
   * done, nothing swapped), where an injected fault fails or hangs it. Default: nothing.
   */
  midway?: (operation: DriverOperation, signal: AbortSignal) => Promise<void>;
  /**
   * Tests only (issue 28 finding 7): called between a restore's or copy's database swap and its
   * document-root swap, where an injected fault must leave the install as it was (a throw is undone
   * at once, a hang that never returns is a dead worker, undone by the next call). Default: nothing.
   */
  betweenSwaps?: (operation: 'restore' | 'copy', signal: AbortSignal) => Promise<void>;
}

const ESTIMATES: Record<DriverOperation, number> = {
  provision: 5,
  copy: 60,
  backup: 60,
  restore: 60,
  measure_disk: 10,
  purge_cache: 1,
  move_site: 1,
  issue_certificate: 5,
  apply_routing: 2,
  deprovision: 5,
};

/**
 * HOSTING_DRIVER=local: installs as real directories under HOSTING_ROOT and real MariaDB databases.
 * Each call does its work before it answers (no "ask again"), inside the job's time (`ctx.signal`
 * stops the tools it spawned). Keyed: finished work is recorded per key (local_tasks, tasks.ts) and a
 * repeated key answers the recorded result; unfinished work is redone from the start after cleaning
 * what an interrupted attempt left (temporary directories, staging databases, a half-done swap).
 * Heavy work (backup, restore, copy) stages everything first and swaps at the end (staging.ts), so a
 * failure leaves the install as it was.
 *
 * The parts, one file each: installs.ts (provision, deprovision, the database account), backups.ts
 * (backup, restore, archive), copies.ts (copy); files.ts and database.ts are the tools they use,
 * names.ts every name and path they derive.
 */
export function createLocalDriver(deps: LocalDriverDeps): HostingDriver & {
  countCompleted(installId: string, operation: DriverOperation): Promise<number>;
  accountOf(installId: string): Promise<{ db_name: string; db_user: string; password: string } | null>;
  /** Issue 31: the SSH server (null without SSH_PORT); the control plane answers its key lookups. */
  sshd: Sshd | null;
} {
  const { db, clock, mariadb, hostingRoot } = deps;
  const ctx: LocalContext = {
    db,
    clock,
    secretBox: deps.secretBox,
    mariadb,
    hostingRoot,
    midway: deps.midway ?? (async () => undefined),
    betweenSwaps: deps.betweenSwaps ?? (async () => undefined),
    once: createTaskRunner({ db, clock, maxHeavy: deps.maxHeavy }),
    web: deps.web ? createWebTier({ db, hostingRoot, mariadb }, deps.web) : null,
  };
  const { once } = ctx;
  const web = ctx.web;
  const sshd = deps.ssh && web ? createSshd(hostingRoot, deps.ssh) : null;
  const acme = createAcmeIssuer({
    db,
    secretBox: deps.secretBox,
    hostingRoot,
    config: deps.acme,
    // HTTP-01 is answered from the install's acme-challenge/ directory, which routing serves on every
    // name of the install (webserver.ts): an ordered name must be one the live configuration serves.
    unservedNames: async (install, names) => {
      if (!web)
        throw new DriverError(
          'issue_certificate',
          'ACME HTTP-01 needs the web tier (LOCAL_WEB=on): nothing serves the challenge',
        );
      return web.unservedNames(install, names);
    },
  });

  return {
    name: 'local',

    // Issue 21: a copy or restore brings the source's (or the backup's) home and siteurl with it.
    routingInContent: ctx.web !== null,

    estimateSeconds: (operation: DriverOperation) => ESTIMATES[operation],

    ...installOperations(ctx),
    ...backupOperations(ctx),
    ...copyOperations(ctx),

    measureDisk: (call: CallContext, install: InstallRef) =>
      once('measure_disk', call, [install.id], async () => ({
        file_bytes: await files.treeBytes(pathsOf(hostingRoot, install.id).root, call.signal),
        database_bytes: await mariadb.databaseBytes(databaseNames(install.id).db),
      })),

    purgeCache: (call: CallContext, input: { install_id: string; type: 'object' | 'page' | 'cdn' }) =>
      once('purge_cache', call, [input.install_id], async () => {
        const { cache } = pathsOf(hostingRoot, input.install_id);
        await files.remove(cache, call.signal);
        await fs.mkdir(cache, { recursive: true });
        // Issue 21: `page` empties nginx's FastCGI cache of the install (no reload needed).
        if (input.type === 'page') await ctx.web?.purgePage(input.install_id);
        return {} as Record<string, never>;
      }),

    // One host: nothing moves; the call is recorded (local_tasks) like every other.
    moveSite: (
      call: CallContext,
      _input: { site_id: string; install_ids: string[]; destination_account_id: string },
    ) => once('move_site', call, [], async () => ({}) as Record<string, never>),

    // Not through `once`: the result holds the certificate's key, which acme_orders keeps sealed.
    issueCertificate: async (call: CallContext, input: { install: InstallRef; names: string[] }) => ({
      done: true as const,
      value: await acme.issue(call, input.install, input.names),
    }),

    // Issue 21: with LOCAL_WEB=on nginx serves the routing; without a web tier there is nothing to route.
    applyRouting: (call: CallContext, input: RoutingRequest) =>
      once('apply_routing', call, [input.install.id], async () =>
        ctx.web ? ctx.web.applyRouting(input, call.signal) : { names: [] },
      ),

    // Issue 29: a sign-in link needs WordPress, which only the web tier installs.
    ...(ctx.web && signInOperations(ctx)),

    ...(ctx.web && {
      collectTraffic: (store: (installId: string, days: TrafficDay[]) => Promise<void>, now: Date) =>
        (ctx.web as NonNullable<typeof ctx.web>).collectTraffic(store, now),
    }),

    ...(ctx.web && {
      async reconcile(installIds: string[]) {
        const web = await (ctx.web as NonNullable<typeof ctx.web>).reconcile(installIds);
        const databases = await reconcileDatabases(ctx, installIds);
        return {
          ...web,
          repaired: [...web.repaired, ...databases.repaired],
          drift: [...web.drift, ...databases.drift],
        };
      },
    }),

    start: async () => {
      // Issue 28: HOSTING_ROOT's root-owned layout with its modes (the web tier's too, with it).
      if (ctx.web) await ctx.web.start();
      else await secureLayout(hostingRoot, false);
      // Issue 31: after the web tier (the install directories sshd chroots into exist).
      await sshd?.start();
    },

    close: () => mariadb.close(),

    countCompleted: (installId: string, operation: DriverOperation) =>
      repo.countCompleted(db, installId, operation),
    accountOf: (installId: string) => accountOf(ctx, installId),
    sshd,
  };
}
