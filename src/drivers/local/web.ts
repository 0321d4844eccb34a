import fs from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../../db/client.js';
import type { InstallRef } from '../driver.js';
import { challengeRoot } from './acme.js';
import type { MariaDb } from './database.js';
import * as files from './files.js';
import * as repo from './local.repo.js';
import { hostName, installSlug, pathsOf, systemUser, webPaths } from './names.js';
import { createPhpFpm } from './php-fpm.js';
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

export function createWebTier(ctx: { db: Db; hostingRoot: string; mariadb: MariaDb }, config: WebConfig) {
  const paths = webPaths(ctx.hostingRoot);
  const nginx = createWebServer(paths, config.httpPort);
  const fpm = createPhpFpm(paths);
  const socketOf = (slug: string) => path.join(paths.run, `${slug}.sock`);
  const cnameOf = (install: InstallRef) => hostName(`${install.name}.${config.installDomain}`);
  /** The install's server block: its cname and `extra` names (validated), its challenge root. */
  const blockOf = (install: InstallRef, extra: string[] = []) => {
    const slug = installSlug(install.id);
    const names = [...new Set([cnameOf(install), ...extra.map(hostName)])];
    return {
      slug,
      names,
      documentRoot: pathsOf(ctx.hostingRoot, install.id).public,
      socket: socketOf(slug),
      challengeRoot: challengeRoot(ctx.hostingRoot, install.id),
    };
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
      const cname = cnameOf(install);
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
          tablePrefix: 'wp_',
        },
        user,
      );
      const facts = await repo.installerFacts(ctx.db, install.id);
      const port = config.httpPort === 80 ? '' : `:${config.httpPort}`;
      await wordpress.runInstaller({
        documentRoot: dirs.public,
        installer: paths.installer,
        user,
        title: facts?.title ?? install.name,
        adminEmail: facts?.email ?? 'owner@invalid.invalid',
        url: `http://${cname}${port}`,
        signal,
      });
      await fpm.put({ slug, user, socket: socketOf(slug), dirs: [dirs.public, dirs.private], tmp }, signal);
      await fs.mkdir(challengeRoot(ctx.hostingRoot, install.id), { recursive: true, mode: 0o755 });
      await nginx.put(blockOf(install), signal);
      return { php_version: await wordpress.phpVersion(signal) };
    },

    /**
     * ACME HTTP-01 (acme.ts): the install's server block answers for `names` too, so the CA's request
     * for `http://<name>/.well-known/acme-challenge/<token>` reaches the install's challenge directory.
     * (Serving an install's domains as such, D1-D7, is the domain routing's; this only adds the names.)
     */
    async serveChallenges(install: InstallRef, names: string[], signal: AbortSignal) {
      await fs.mkdir(challengeRoot(ctx.hostingRoot, install.id), { recursive: true, mode: 0o755 });
      await nginx.put(blockOf(install, names), signal);
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

    /** Stops serving an install: its server block (reloaded), its pool, its user. */
    async deprovision(installId: string, signal: AbortSignal) {
      const slug = installSlug(installId);
      await nginx.remove(slug, signal);
      await fpm.remove(slug);
      await wordpress.removeUser(systemUser(installId), signal);
    },
  };
}

export type WebTier = ReturnType<typeof createWebTier>;
