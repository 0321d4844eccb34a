import fs from 'node:fs/promises';
import path from 'node:path';
import * as files from './files.js';
import { configPath, hostName, type WebPaths } from './names.js';
import { run, TOOL_ENV } from './run.js';
import { livePid, reloadOrStart } from './supervise.js';

/**
 * nginx for the local driver's installs (issue 21): a configuration of Hostplane's own under
 * HOSTING_ROOT/web (main file, one server block per install in sites/), a master started from it when
 * absent. Every change is checked before it is live: the new set of server blocks is copied to
 * candidate/ with a main file that includes it, `nginx -t` checks that whole configuration, and only
 * then the block is renamed into sites/ and nginx reloaded. A configuration that fails the check
 * never replaces the running one: the change throws with nginx's message and nothing is reloaded.
 */

export const NGINX = '/usr/sbin/nginx';

export interface ServerBlock {
  /** `hp_<hex>`: the file's name in sites/ and the install's socket's. */
  slug: string;
  /** The names it answers for (validated host names). */
  names: string[];
  documentRoot: string;
  socket: string;
  /**
   * Issue 21, ACME HTTP-01: the install's challenge root (HOSTING_ROOT/web/challenges/hp_<hex>), served
   * at `/.well-known/acme-challenge/` for every name of the block.
   */
  challengeRoot: string;
}

function mainConf(paths: WebPaths, sitesDir: string, httpPort: number) {
  const t = paths.tmp;
  return `# Written by Hostplane (local driver, web tier): do not edit, it is rewritten.
${process.getuid?.() === 0 ? 'user www-data;\n' : ''}worker_processes 1;
pid ${paths.nginxPid};
error_log ${path.join(paths.logs, 'nginx-error.log')};
events { worker_connections 512; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  sendfile on;
  server_tokens off;
  access_log ${path.join(paths.logs, 'nginx-access.log')};
  client_body_temp_path ${t}/body;
  fastcgi_temp_path ${t}/fastcgi;
  proxy_temp_path ${t}/proxy;
  uwsgi_temp_path ${t}/uwsgi;
  scgi_temp_path ${t}/scgi;
  client_max_body_size 64m;
  # A host no install answers for: the connection is closed.
  server {
    listen ${httpPort} default_server;
    server_name _;
    return 444;
  }
  include ${sitesDir}/*.conf;
}
`;
}

/** One install's server block: every value in it is a validated name or path (names.ts). */
export function serverBlock(block: ServerBlock, httpPort: number, logs: string): string {
  const names = block.names.map(hostName).join(' ');
  const root = configPath(block.documentRoot);
  const socket = configPath(block.socket);
  if (!/^hp_[0-9a-f]{32}$/.test(block.slug)) throw new Error(`not an install slug: ${block.slug}`);
  return `# Written by Hostplane for install ${block.slug}: do not edit, it is rewritten.
server {
  listen ${httpPort};
  server_name ${names};
  root ${root};
  index index.php index.html;
  access_log ${configPath(path.join(logs, `${block.slug}.access.log`))};
  location ^~ /.well-known/acme-challenge/ {
    root ${configPath(block.challengeRoot)};
    default_type text/plain;
    try_files $uri =404;
  }
  location = /wp-config.php { deny all; }
  location ~ /\\. { deny all; }
  location / {
    try_files $uri $uri/ /index.php?$args;
  }
  location ~ \\.php$ {
    try_files $uri =404;
    include /etc/nginx/fastcgi_params;
    fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
    fastcgi_param HTTP_HOST $http_host;
    fastcgi_pass unix:${socket};
  }
}
`;
}

export function createWebServer(paths: WebPaths, httpPort: number) {
  if (!Number.isInteger(httpPort) || httpPort < 1 || httpPort > 65535) throw new Error('bad HTTP port');
  // One change at a time in this process (the candidate directory is shared).
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const next = chain.then(work, work);
    chain = next.catch(() => undefined);
    return next;
  };

  async function prepare() {
    for (const dir of [paths.sites, paths.run, paths.logs, paths.tmp])
      await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(paths.nginxConf, mainConf(paths, paths.sites, httpPort));
  }

  /** Checks the live set with `change` applied; throws nginx's message when it does not pass. */
  async function check(change: { slug: string; text: string | null }, signal: AbortSignal) {
    await files.remove(paths.candidate);
    const sites = path.join(paths.candidate, 'sites');
    await fs.mkdir(sites, { recursive: true });
    for (const name of await fs.readdir(paths.sites)) {
      if (!name.endsWith('.conf') || name === `${change.slug}.conf`) continue;
      await fs.copyFile(path.join(paths.sites, name), path.join(sites, name));
    }
    if (change.text !== null) await fs.writeFile(path.join(sites, `${change.slug}.conf`), change.text);
    const conf = path.join(paths.candidate, 'nginx.conf');
    await fs.writeFile(conf, mainConf(paths, sites, httpPort));
    try {
      await run(NGINX, ['-t', '-q', '-c', conf], { signal, env: TOOL_ENV });
    } catch (err) {
      throw new Error(
        `nginx refused the new configuration, the running one is kept: ${(err as Error).message}`,
      );
    } finally {
      await files.remove(paths.candidate);
    }
  }

  /** Starts nginx when it is not running, else reloads it (the live files were checked). */
  async function startOrReload() {
    await reloadOrStart(
      paths.nginxPid,
      'SIGHUP',
      NGINX,
      ['-c', paths.nginxConf],
      path.join(paths.logs, 'nginx-start.log'),
    );
  }

  return {
    /** Writes (or rewrites) an install's server block: checked, renamed in, reloaded. */
    put: (block: ServerBlock, signal: AbortSignal) =>
      serial(async () => {
        await prepare();
        const text = serverBlock(block, httpPort, paths.logs);
        await check({ slug: block.slug, text }, signal);
        const live = path.join(paths.sites, `${block.slug}.conf`);
        const temp = path.join(paths.sites, `.${block.slug}.conf.tmp`);
        await fs.writeFile(temp, text);
        await fs.rename(temp, live);
        await startOrReload();
      }),

    /** Removes an install's server block (when there is one) and reloads. */
    remove: (slug: string, signal: AbortSignal) =>
      serial(async () => {
        const live = path.join(paths.sites, `${slug}.conf`);
        if (!(await files.exists(live))) return;
        await prepare();
        await check({ slug, text: null }, signal);
        await fs.rm(live, { force: true });
        await startOrReload();
      }),

    running: () => livePid(paths.nginxPid),
  };
}
