import fs from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../../db/client.js';
import type { InstallRef, TrafficDay } from '../driver.js';
import { rollLog } from './access-log.js';
import type { MariaDb } from './database.js';
import * as files from './files.js';
import * as repo from './local.repo.js';
import { hostName, installSlug, pathsOf, systemUser, webPaths } from './names.js';
import { createPhpFpm } from './php-fpm.js';
import { searchReplace, urlPairs } from './search-replace.js';
import { createWebServer } from './webserver.js';
import * as wordpress from './wordpress.js';

/**
 * The local driver's web tier (issue 21, LOCAL_WEB=on): an install served by nginx and PHP-FPM with
 * WordPress installed in it. Provisioning adds the install's system user, WordPress core, its
 * wp-config.php, WordPress's installer run, its PHP-FPM pool and its server block (for its cname,
 * `<name>.<INSTALL_DOMAIN>`); deprovisioning removes the server block, the pool and the user.
 */

export interface WebConfig {
  /** HOSTING_HTTP_PORT. */
  httpPort: number;
  /** INSTALL_DOMAIN: an install's default name is `<name>.<INSTALL_DOMAIN>`. */
  installDomain: string;
}

/** Every install's WordPress tables start with it (wp-config.php's `$table_prefix`). */
export const TABLE_PREFIX = 'wp_';

export function createWebTier(ctx: { db: Db; hostingRoot: string; mariadb: MariaDb }, config: WebConfig) {
  const paths = webPaths(ctx.hostingRoot);
  const nginx = createWebServer(paths, config.httpPort);
  const fpm = createPhpFpm(paths);
  const socketOf = (slug: string) => path.join(paths.run, `${slug}.sock`);
  /** The install's site URL as provisioning sets it: `http://<cname>[:port]`. */
  const siteUrl = (install: InstallRef) => {
    const port = config.httpPort === 80 ? '' : `:${config.httpPort}`;
    return `http://${hostName(`${install.name}.${config.installDomain}`)}${port}`;
  };

  return {
    paths,

    /** Serves an install (its database account made, its directories there). Safe to run again. */
    async provision(
      install: InstallRef,
      account: { db_name: string; db_user: string; password: string },
      signal: AbortSignal,
    ): Promise<{ php_version: string | null }> {
      const slug = installSlug(install.id);
      const user = systemUser(install.id);
      const dirs = pathsOf(ctx.hostingRoot, install.id);
      const cname = hostName(`${install.name}.${config.installDomain}`);
      // Others (nginx, each pool's user) may pass through, not list.
      for (const dir of [ctx.hostingRoot, path.dirname(dirs.root), dirs.root]) await fs.chmod(dir, 0o711);
      await wordpress.ensureUser(user, signal);
      const tmp = path.join(dirs.private, 'tmp');
      await fs.mkdir(tmp, { recursive: true });
      if (!(await files.exists(path.join(dirs.public, 'wp-settings.php'))))
        await wordpress.copyCore(dirs.public);
      await wordpress.chownTree(dirs.public, user, signal);
      await wordpress.chownTree(dirs.private, user, signal);
      const target = ctx.mariadb.target;
      await wordpress.writeWpConfig(
        dirs.public,
        {
          dbName: account.db_name,
          dbUser: account.db_user,
          dbPassword: account.password,
          dbHost: `${target.host}:${target.port}`,
          tablePrefix: TABLE_PREFIX,
        },
        user,
      );
      const facts = await repo.installerFacts(ctx.db, install.id);
      await wordpress.runInstaller({
        documentRoot: dirs.public,
        installer: paths.installer,
        user,
        title: facts?.title ?? install.name,
        adminEmail: facts?.email ?? 'owner@invalid.invalid',
        url: siteUrl(install),
        signal,
      });
      await fpm.put({ slug, user, socket: socketOf(slug), dirs: [dirs.public, dirs.private], tmp }, signal);
      await nginx.put({ slug, names: [cname], documentRoot: dirs.public, socket: socketOf(slug) }, signal);
      return { php_version: await wordpress.phpVersion(signal) };
    },

    /**
     * A staged document root (a restore's, a copy's) made ready to serve the install before it is
     * swapped in: the install's own wp-config.php (its database credentials) replaces whatever the
     * backup or the copy's source brought, the tree is owned by the install's user (PHP runs as it:
     * it reads wp-config.php, WordPress writes uploads) and wp-config.php is 0640 as at provisioning.
     */
    async adopt(installId: string, staged: string, signal: AbortSignal) {
      const own = path.join(pathsOf(ctx.hostingRoot, installId).public, 'wp-config.php');
      const target = path.join(staged, 'wp-config.php');
      if (await files.exists(own)) await fs.copyFile(own, target);
      await wordpress.chownTree(staged, systemUser(installId), signal);
      if (await files.exists(target)) await fs.chmod(target, 0o640);
    },

    /**
     * C1-C4: a copy's tables, loaded into `database` (the destination's staging one), get the
     * destination's URLs wherever they hold the source's (serialized values included).
     */
    rewriteUrls: (source: InstallRef, destination: InstallRef, database: string, signal: AbortSignal) =>
      searchReplace({
        target: ctx.mariadb.target,
        database,
        prefix: TABLE_PREFIX,
        pairs: urlPairs(siteUrl(source), siteUrl(destination)),
        scriptPath: paths.searchReplace,
        signal,
      }),

    /**
     * At `hostplane serve`/`worker` start: nginx (and PHP-FPM when it has pools) started when absent
     * from the live configuration, a running one left alone (no reload, no second master).
     */
    async start() {
      await nginx.ensureRunning();
      await fpm.ensureRunning();
    },

    /** Rolls every install's new access-log lines (access-log.ts); answers the days stored. */
    async collectTraffic(store: (installId: string, days: TrafficDay[]) => Promise<void>, now: Date) {
      const names = await fs.readdir(paths.logs).catch(() => [] as string[]);
      let stored = 0;
      for (const name of names) {
        const m = /^hp_([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})\.access\.log$/.exec(
          name,
        );
        if (!m) continue;
        const installId = m.slice(1).join('-');
        const days = await rollLog(
          path.join(paths.logs, name),
          (d) => store(installId, d),
          now.toISOString().slice(0, 10),
        );
        stored += days.length;
      }
      return stored;
    },

    /** Empties the install's FastCGI page cache: its files go, nginx answers MISS for them. */
    async purgePage(installId: string) {
      const dir = path.join(paths.cache, installSlug(installId));
      const entries = await fs.readdir(dir).catch(() => [] as string[]);
      for (const entry of entries) await files.remove(path.join(dir, entry));
    },

    /** Stops serving an install: its server block (reloaded), its pool, its user. */
    async deprovision(installId: string, signal: AbortSignal) {
      const slug = installSlug(installId);
      await nginx.remove(slug, signal);
      await fpm.remove(slug);
      await files.remove(path.join(paths.cache, slug));
      await files.remove(path.join(paths.logs, `${slug}.access.log`));
      await files.remove(path.join(paths.logs, `${slug}.access.log.usage.json`));
      await wordpress.removeUser(systemUser(installId), signal);
    },
  };
}

export type WebTier = ReturnType<typeof createWebTier>;
