import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import type { Db } from '../../db/client.js';
import { DriverError, type InstallRef, type RoutingRequest, type TrafficDay } from '../driver.js';
import { rollLog } from './access-log.js';
import type { MariaDb } from './database.js';
import * as files from './files.js';
import * as repo from './local.repo.js';
import { closedMessage, closedParents, secureLayout } from './modes.js';
import {
  hostName,
  installIdOfSlug,
  installSlug,
  pathsOf,
  serverName,
  systemUser,
  webPaths,
} from './names.js';
import { createPhpFpm } from './php-fpm.js';
import { ToolError } from './run.js';
import { searchReplace, urlPairs } from './search-replace.js';
import { signalDaemon } from './supervise.js';
import * as tenant from './tenant.js';
import { createWebServer, type ServerBlock } from './webserver.js';
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
  /** HOSTING_HTTPS_PORT. */
  httpsPort: number;
  /** INSTALL_DOMAIN: an install's default name is `<name>.<INSTALL_DOMAIN>`. */
  installDomain: string;
  /** LOCAL_PHP_REQUEST_TIMEOUT_SECONDS (default 300): PHP-FPM ends a site's request running longer. */
  phpRequestTimeoutSeconds?: number;
}

/** Every install's WordPress tables start with it (wp-config.php's `$table_prefix`). */
export const TABLE_PREFIX = 'wp_';

/** Issue 30: how long a move's target may take to answer the install's first page (warm). */
const WARM_SECONDS = 60;

/** The status nginx on this server answers for `GET /` on `name` (the body read and dropped). */
function pageStatus(port: number, name: string, timeoutMs: number, signal: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      {
        host: '127.0.0.1',
        port,
        path: '/',
        headers: { host: port === 80 ? name : `${name}:${port}`, 'user-agent': 'hostplane-warm' },
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}

export function createWebTier(ctx: { db: Db; hostingRoot: string; mariadb: MariaDb }, config: WebConfig) {
  const paths = webPaths(ctx.hostingRoot);
  const nginx = createWebServer(paths, { http: config.httpPort, https: config.httpsPort });
  const fpm = createPhpFpm(paths, { requestTimeoutSeconds: config.phpRequestTimeoutSeconds });
  const socketOf = (slug: string) => path.join(paths.run, `${slug}.sock`);
  /** An install's PHP-FPM pool: made of its id alone. */
  const poolOf = (installId: string) => {
    const dirs = pathsOf(ctx.hostingRoot, installId);
    const slug = installSlug(installId);
    return {
      slug,
      user: systemUser(installId),
      socket: socketOf(slug),
      dirs: [dirs.public, dirs.private],
      tmp: path.join(dirs.private, 'tmp'),
    };
  };
  const origin = (scheme: 'http' | 'https', name: string) => {
    const port = scheme === 'http' ? config.httpPort : config.httpsPort;
    return `${scheme}://${name}${port === (scheme === 'http' ? 80 : 443) ? '' : `:${port}`}`;
  };

  /**
   * The install's server blocks from the whole routing state (issue 21): the site on its default name
   * and every domain without a redirect, each redirecting domain answering 301 to its target (https
   * when a certificate covers the target), each certificate written (0600, root's, under the
   * install's tls/) and served for its names. Answers what it served and the site's URL (the primary
   * domain's, else the default name's; https when a certificate covers it).
   */
  async function routingBlock(install: InstallRef, routing: Omit<RoutingRequest, 'install'>) {
    const slug = installSlug(install.id);
    const dirs = pathsOf(ctx.hostingRoot, install.id);
    const defaultName = hostName(routing.default_name);
    // Each name once, checked again before it reaches a file (the API refused the others already).
    const domains = routing.domains.filter((d) => serverName(d.name) !== defaultName);
    const served = [defaultName, ...domains.filter((d) => d.redirect_to === null).map((d) => d.name)];
    const certOf = new Map<string, { certificate: string; key: string }>();
    const tls: NonNullable<ServerBlock['tls']> = [];
    const wanted = new Set<string>();
    await fs.mkdir(dirs.tls, { recursive: true, mode: 0o700 });
    await fs.chmod(dirs.tls, 0o700);
    for (const cert of routing.certificates) {
      // A name is served with the first certificate given for it (the newest).
      const names = cert.names.filter(
        (n) => !certOf.has(n) && (n === defaultName || domains.some((d) => d.name === n)),
      );
      if (names.length === 0) continue;
      const id = createHash('sha256').update(cert.chain_pem).update(cert.key_pem).digest('hex').slice(0, 32);
      const files = { certificate: path.join(dirs.tls, `${id}.crt`), key: path.join(dirs.tls, `${id}.key`) };
      await writeSecret(files.certificate, cert.chain_pem);
      await writeSecret(files.key, cert.key_pem);
      wanted.add(`${id}.crt`).add(`${id}.key`);
      for (const n of names) certOf.set(n, files);
      tls.push({ names: names.map(serverName), ...files });
    }
    const urlOf = (name: string) => origin(certOf.has(name) ? 'https' : 'http', name);
    const byTarget = new Map<string, string[]>();
    for (const d of domains) {
      if (d.redirect_to === null) continue;
      const target = urlOf(d.redirect_to);
      byTarget.set(target, [...(byTarget.get(target) ?? []), d.name]);
    }
    await fs.mkdir(dirs.challenges, { recursive: true });
    await fs.chmod(dirs.challenges, 0o755);
    const primary = domains.find((d) => d.primary && d.redirect_to === null);
    // D2: secure_all_urls upgrades a served name's plain HTTP only once a certificate covers it.
    const secure = domains.filter((d) => d.redirect_to === null && d.secure_all_urls && certOf.has(d.name));
    const block: ServerBlock = {
      slug,
      names: served.map(serverName),
      secure: secure.map((d) => serverName(d.name)),
      documentRoot: dirs.public,
      socket: socketOf(slug),
      challenges: dirs.challenges,
      redirects: [...byTarget].map(([target, names]) => ({ target, names })),
      tls,
      url: urlOf(primary?.name ?? defaultName),
      // Issue 29 defect 1: pages cached before this routing are never answered after it.
      cacheGeneration: randomBytes(8).toString('hex'),
      frozen: routing.frozen === true,
      ...(routing.forward_to !== undefined && { forward: routing.forward_to }),
    };
    const names = [...served, ...domains.filter((d) => d.redirect_to !== null).map((d) => d.name)];
    return { block, names, wanted, url: block.url as string };
  }

  /** Certificates no server block names any more (replaced, or their domains gone). */
  async function removeStaleCertificates(installId: string, wanted: Set<string>) {
    const { tls } = pathsOf(ctx.hostingRoot, installId);
    for (const name of await fs.readdir(tls).catch(() => [] as string[]))
      if (!wanted.has(name)) await fs.rm(path.join(tls, name), { force: true });
  }
  /**
   * Issue 28, installs made before the tenant model, at start: nginx's user joins each install's
   * group, each install's own directory is 0711 again, and a document root others can still read gets
   * the model's modes (chmod run as the install's user; one that fails is left to `hostplane doctor`,
   * which lists it, and to the install's next provisioning). Answers whether a group was joined.
   */
  async function adoptExistingInstalls(): Promise<boolean> {
    const installs = path.join(ctx.hostingRoot, 'installs');
    const groups: string[] = [];
    for (const name of await fs.readdir(installs).catch(() => [] as string[])) {
      if (!/^hp_[0-9a-f]{32}$/.test(name)) continue;
      await fs.chmod(path.join(installs, name), 0o711);
      const user = name.replace('hp_', 'hp').slice(0, 32);
      if (!(await wordpress.userExists(user))) continue;
      groups.push(user);
      const dirs = {
        public: path.join(installs, name, 'public'),
        private: path.join(installs, name, 'private'),
      };
      const open = await fs.stat(dirs.public).then(
        (st) => (st.mode & 0o007) !== 0,
        () => false,
      );
      if (open)
        await wordpress
          .restrictTree(dirs.public, dirs.private, user, AbortSignal.timeout(120_000))
          .catch(() => undefined);
    }
    return groups.length > 0 && wordpress.addWebUserTo(groups, AbortSignal.timeout(30_000));
  }

  /** A running nginx reloaded when its user joined groups (its new workers have them); false: not running. */
  async function signalIfJoined(joined: boolean) {
    if (!joined || !(await nginx.running())) return false;
    return signalDaemon(paths.nginxPid, 'SIGHUP');
  }

  /** Empties the install's FastCGI page cache: its files go, nginx answers MISS for them. */
  async function purgePage(installId: string) {
    const dir = path.join(paths.cache, installSlug(installId));
    const entries = await fs.readdir(dir).catch(() => [] as string[]);
    for (const entry of entries) await files.remove(path.join(dir, entry));
  }

  /**
   * Issue 30: the install's front page asked for through this server's nginx, on its default name, as a
   * visitor would (PHP's compiled code and the page cache filled before the first visitor comes). Any
   * answer from the site serves it, an error page of its own included (a site broken on its source is
   * moved as it is: a drain must not stop at it); no answer, or nginx's 502/504 (its pool does not
   * answer), does not. Up to three tries within WARM_SECONDS; else a final DriverError.
   */
  async function warm(name: string, signal: AbortSignal) {
    const until = Date.now() + WARM_SECONDS * 1000;
    let last = '';
    for (let attempt = 1; attempt <= 3 && Date.now() < until; attempt++) {
      const status = await pageStatus(
        config.httpPort,
        name,
        Math.max(1000, until - Date.now()),
        signal,
      ).catch((err: Error) => {
        last = err.message;
        return 0;
      });
      if (status > 0 && status !== 502 && status !== 504) return;
      if (status > 0) last = `it answered ${status}`;
      if (signal.aborted) throw signal.reason;
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
    throw new DriverError(
      'apply_routing',
      `the install's page does not answer on this server: ${last}`,
      true,
    );
  }

  /** The install's site URL as provisioning sets it: `http://<cname>[:port]`. */
  const siteUrl = (install: InstallRef) => {
    const port = config.httpPort === 80 ? '' : `:${config.httpPort}`;
    return `http://${hostName(`${install.name}.${config.installDomain}`)}${port}`;
  };

  return {
    paths,

    /**
     * Serves an install (its database account made, its directories there). Safe to run again.
     * `adminPassword`: the owner's WordPress administrator's (null: a random one nobody is told).
     */
    async provision(
      install: InstallRef,
      account: { db_name: string; db_user: string; password: string },
      adminPassword: string | null,
      signal: AbortSignal,
    ): Promise<{ php_version: string | null; admin: { username: string; login_url: string } }> {
      const user = systemUser(install.id);
      const dirs = pathsOf(ctx.hostingRoot, install.id);
      const cname = hostName(`${install.name}.${config.installDomain}`);
      // Issue 29 defect 2: a HOSTING_ROOT its users cannot reach fails every provisioning the same way.
      const closed = closedParents(ctx.hostingRoot);
      if (closed.length > 0) throw new ToolError(closedMessage(ctx.hostingRoot, closed), true);
      // Issue 28: the tenant file model's modes (modes.ts); others (nginx, each pool's user) may pass
      // through the install's directory, not list it.
      await secureLayout(ctx.hostingRoot, true);
      await fs.chmod(dirs.root, 0o711);
      await wordpress.ensureUser(user, signal);
      const tmp = path.join(dirs.private, 'tmp');
      await fs.mkdir(tmp, { recursive: true });
      if (!(await files.exists(path.join(dirs.public, 'wp-settings.php'))))
        await wordpress.copyCore(dirs.public, signal);
      await wordpress.chownTree(dirs.public, user, signal);
      await wordpress.chownTree(dirs.private, user, signal);
      // Directories 0750, files 0640 (nginx reads them as a member of the install's group), set as
      // the install's user; existing installs get them here too, at their next provisioning.
      await wordpress.restrictTree(dirs.public, dirs.private, user, signal);
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
        signal,
      );
      const facts = await repo.installerFacts(ctx.db, install.id);
      await wordpress.runInstaller({
        documentRoot: dirs.public,
        installer: paths.installer,
        user,
        title: facts?.title ?? install.name,
        adminEmail: facts?.email ?? 'owner@invalid.invalid',
        url: siteUrl(install),
        adminUser: wordpress.ADMIN_USER,
        adminPassword: adminPassword ?? randomBytes(18).toString('base64url'),
        signal,
      });
      await fpm.put(poolOf(install.id), signal);
      // The default name only: the install's domains and certificates follow (apply_routing).
      const { block } = await routingBlock(install, { default_name: cname, domains: [], certificates: [] });
      await nginx.put(block, signal);
      return {
        php_version: await wordpress.phpVersion(signal),
        admin: { username: wordpress.ADMIN_USER, login_url: `${siteUrl(install)}/wp-login.php` },
      };
    },

    /**
     * Issue 21 (D1-D7, L1-L2): the install's server blocks rebuilt from the whole routing state
     * and checked by `nginx -t`; WordPress's home and siteurl set to the site's URL; then the blocks
     * swapped in and reloaded. Safe to run again; a failed check changes nothing that is served.
     * Issue 29 defect 1: the site URL moves before the new blocks serve (a request on a new name or
     * scheme never meets WordPress's old URL, whose canonical redirect pointed at the old port), the
     * new blocks' page-cache generation makes every page cached before unreachable (also one built
     * from the old URL by a request in flight), and the install's cache files are purged after.
     */
    async applyRouting(routing: RoutingRequest, signal: AbortSignal): Promise<{ names: string[] }> {
      const { install } = routing;
      const { block, names, wanted, url } = await routingBlock(install, routing);
      const dirs = pathsOf(ctx.hostingRoot, install.id);
      await nginx.put(block, signal, async () => {
        if (!(await files.exists(path.join(dirs.public, 'wp-config.php')))) return false;
        return wordpress.setSiteUrl({
          documentRoot: dirs.public,
          script: paths.siteUrl,
          user: systemUser(install.id),
          url,
          signal,
        });
      });
      await removeStaleCertificates(install.id, wanted);
      await purgePage(install.id);
      if (routing.warm) await warm(hostName(routing.default_name), signal);
      return { names };
    },

    /**
     * A staged document root (a restore's, a copy's) made ready to serve the install before it is
     * swapped in: the install's own wp-config.php replaces whatever the backup or the copy's source
     * brought. Issue 28 finding 1: its content is the driver's (the install's database account, the
     * table prefix; the salts of the live file kept when root can read them safely: a regular file,
     * opened O_NOFOLLOW|O_NONBLOCK, bounded), written by the tree's owner (tenant.ts), 0640. The
     * tree is already its user's (extracted or copied as that user).
     */
    async adopt(
      installId: string,
      staged: string,
      account: { db_name: string; db_user: string; password: string } | null,
      signal: AbortSignal,
    ) {
      if (!account) return;
      const owner = await tenant.ownerOf(staged);
      if (!owner) throw new Error(`no staged tree at ${staged}`);
      const live = path.join(pathsOf(ctx.hostingRoot, installId).public, 'wp-config.php');
      const current = await tenant.readRegular(live, 64 * 1024);
      const target = ctx.mariadb.target;
      const text = wordpress.wpConfig(
        {
          dbName: account.db_name,
          dbUser: account.db_user,
          dbPassword: account.password,
          dbHost: `${target.host}:${target.port}`,
          tablePrefix: TABLE_PREFIX,
        },
        wordpress.saltsOf(current?.toString('utf8') ?? ''),
      );
      await tenant.writeTreeFile(owner, path.join(staged, 'wp-config.php'), text, 0o640, signal);
    },

    /**
     * ACME HTTP-01 (acme.ts): the names of `names` the install's live configuration does not serve yet
     * (their challenge would fail). Routing serves the install's challenge directory on every name of
     * it, domains included, so an ordered domain is served once its apply_routing has run.
     */
    async unservedNames(install: InstallRef, names: string[]): Promise<string[]> {
      const served = await nginx.servedNames(installSlug(install.id));
      return names.filter((n) => {
        try {
          return !served.has(serverName(n));
        } catch {
          return true;
        }
      });
    },

    /**
     * C1-C4: a copy's tables, loaded into the destination's staging database, get the
     * destination's site URL (its primary's, as its routing last set it) wherever they hold one of
     * the source's host names (its default name and every domain its routing serves, serialized
     * values included).
     */
    async rewriteUrls(
      source: InstallRef,
      destination: InstallRef,
      signal: AbortSignal,
      knownNames: string[] = [],
    ) {
      const sourceNames = await nginx.servedNames(installSlug(source.id));
      sourceNames.add(new URL(siteUrl(source)).hostname);
      // Decision #223: the source's domains as the control plane holds them (checked like any name).
      for (const name of knownNames) if (!name.startsWith('*.')) sourceNames.add(serverName(name));
      const url = (await nginx.siteUrlOf(installSlug(destination.id))) ?? siteUrl(destination);
      // Issue 28 finding 10: as the destination's user, on its staging database only (search-replace.ts).
      return searchReplace({
        mariadb: ctx.mariadb,
        installId: destination.id,
        prefix: TABLE_PREFIX,
        pairs: urlPairs([...sourceNames], { http: config.httpPort, https: config.httpsPort }, url),
        scriptPath: paths.searchReplace,
        signal,
      });
    },

    /**
     * At `hostplane serve`/`worker` start: nginx (and PHP-FPM when it has pools) started when absent
     * from the live configuration, a running one left alone (no reload, no second master).
     */
    async start() {
      const closed = closedParents(ctx.hostingRoot);
      if (closed.length > 0) throw new Error(closedMessage(ctx.hostingRoot, closed));
      await secureLayout(ctx.hostingRoot, true);
      const joined = await adoptExistingInstalls();
      // nginx's workers take the groups nginx's user was just added to at their next start.
      if (!(await signalIfJoined(joined))) await nginx.ensureRunning();
      await fpm.ensureRunning();
      // Each existing pool as this version writes it (a setting added since, e.g. the request
      // timeout): rewritten and its own master reloaded only where it differs.
      for (const slug of await fpm.slugs()) {
        const id = installIdOfSlug(slug);
        if (await wordpress.userExists(systemUser(id)))
          await fpm.put(poolOf(id), AbortSignal.timeout(60_000)).catch(() => undefined);
      }
    },

    /**
     * Issue 30: nginx and PHP-FPM started again when they are not running (answers what was), and
     * what is missing of each install (its server block, its pool).
     */
    async reconcile(installIds: string[]) {
      const repaired: string[] = [];
      if (!(await nginx.running())) {
        await nginx.ensureRunning();
        repaired.push('nginx was not running: started');
      }
      // Each install's PHP-FPM master (decision #251): started again when it has a pool.
      const { started, retired } = await fpm.ensureRunning();
      if (retired)
        repaired.push("PHP-FPM's shared master of an earlier version: replaced by one per install");
      for (const slug of started)
        repaired.push(`install ${installIdOfSlug(slug)}: its PHP-FPM was not running: started`);
      const drift: string[] = [];
      const routingMissing: string[] = [];
      for (const id of installIds) {
        const slug = installSlug(id);
        const blockFile = path.join(paths.sites, `${slug}.conf`);
        if (!(await files.exists(blockFile))) {
          // Its names and certificates are the control plane's: asked for again (decision #212).
          drift.push(`install ${id}: its server block is missing`);
          routingMissing.push(id);
        } else {
          // Decision #240: a certificate or key file the block names and that is gone would fail
          // every reload of nginx (all installs'): its routing is asked for again, which writes them.
          const text = await fs.readFile(blockFile, 'utf8');
          const named = [...text.matchAll(/^\s*ssl_certificate(?:_key)? (\/[^;\s]+);$/gm)].map(
            (m) => m[1] as string,
          );
          const gone: string[] = [];
          for (const file of new Set(named)) if (!(await files.exists(file))) gone.push(path.basename(file));
          if (gone.length > 0) {
            drift.push(`install ${id}: its certificate files are missing (${gone.join(', ')})`);
            routingMissing.push(id);
          }
        }
        if (!(await files.exists(path.join(paths.pools, `${slug}.conf`)))) {
          // A pool is made of the install's id alone: written again when its user and tree are there.
          const user = systemUser(id);
          const dirs = pathsOf(ctx.hostingRoot, id);
          const whole = (await wordpress.userExists(user)) && (await files.exists(dirs.public));
          if (!whole) {
            drift.push(`install ${id}: its PHP-FPM pool is missing`);
            continue;
          }
          await fpm.put(poolOf(id), AbortSignal.timeout(60_000));
          repaired.push(`install ${id}: its PHP-FPM pool was missing: written again`);
        }
      }
      return { repaired, drift, routing_missing: routingMissing };
    },

    /** Rolls every install's new access-log lines (access-log.ts); answers the days stored. */
    async collectTraffic(store: (installId: string, days: TrafficDay[]) => Promise<void>, now: Date) {
      const names = await fs.readdir(paths.logs).catch(() => [] as string[]);
      let stored = 0;
      for (const name of names) {
        const slug = /^(hp_[0-9a-f]{32})\.access\.log$/.exec(name)?.[1];
        if (!slug) continue;
        const installId = installIdOfSlug(slug);
        const days = await rollLog(
          path.join(paths.logs, name),
          (d) => store(installId, d),
          now.toISOString().slice(0, 10),
        );
        stored += days.length;
      }
      return stored;
    },

    purgePage,

    /**
     * Issue 30 (decision #239): the install's front page asked for on its default name (see `warm`):
     * a move's final restore warms its target before the switch, whose routing it applied before the
     * freeze.
     */
    warmInstall: (install: InstallRef, signal: AbortSignal) =>
      warm(hostName(`${install.name}.${config.installDomain}`), signal),

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

/** A certificate or key: written whole (temp file, rename), mode 0600, readable by root only. */
async function writeSecret(file: string, text: string) {
  const temp = `${file}.tmp`;
  await fs.writeFile(temp, text, { mode: 0o600 });
  await fs.chmod(temp, 0o600);
  await fs.rename(temp, file);
}
