import fs from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import path from 'node:path';
import * as files from './files.js';
import { machineSerial } from './machine-lock.js';
import { configPath, serverName, type WebPaths } from './names.js';
import { run, TOOL_ENV, ToolError } from './run.js';
import { childrenOf, livePid, reloadOrStart, untilNewChild } from './supervise.js';

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
  /** Issue 21 (routing): the install's ACME HTTP-01 directory, served on every name over HTTP. */
  challenges?: string;
  /**
   * D2 `secure_all_urls` (issue 21): names of `names` whose plain-HTTP requests answer 301 to the same
   * host and URI over HTTPS (each must be covered by `tls`); HTTP-01 challenges are still answered.
   */
  secure?: string[];
  /** Issue 21 (D5): names that answer 301 to `target` (an origin: scheme, host, port), path kept. */
  redirects?: { names: string[]; target: string }[];
  /** Issue 21 (L1-L2): names served over HTTPS (SNI) with a certificate and key (file paths). */
  tls?: { names: string[]; certificate: string; key: string }[];
  /**
   * Issue 21: the site's URL (an origin) as routing set WordPress's home to, recorded in the file
   * (a comment) so a copy into the install rewrites links to it (`siteUrlOf`).
   */
  url?: string;
  /**
   * Issue 29 defect 1: part of the page cache's key (1-32 hex digits), new at every routing change,
   * so pages cached before it are never answered after it. Default `0`.
   */
  cacheGeneration?: string;
  /**
   * Issue 30: the install's move makes its final copy: requests other than GET, HEAD and OPTIONS
   * answer 503 with Retry-After (nothing written on the source after its last backup is lost). Not in
   * the blocks' text (decision #245): a flag file the blocks test at each request, so a freeze and its
   * end reload nothing.
   */
  frozen?: boolean;
  /**
   * Issue 30 (decision #241): the install moved to the server at this address: every request for its
   * names is passed there (same scheme and port; the name kept as Host and sent by SNI) for the move's
   * grace period. Its own files, pool and page cache are not used.
   */
  forward?: string;
}

/** The flag file whose presence freezes an install's writes (decision #245): root's, in run/. */
export const freezeFlag = (run: string, slug: string) => path.join(run, `${slug}.frozen`);

/**
 * Issue 30: what a frozen install answers a write (a move's final sync; decision #211): in every site
 * block, tested at each request (a stat of the install's flag file; decision #245). nginx's 503s only
 * (PHP's own 503 pages are not intercepted: no `fastcgi_intercept_errors`).
 */
const frozenCheck = (flag: string) => `  set $hp_frozen "";
  if (-f ${configPath(flag)}) {
    set $hp_frozen "f";
  }
  if ($request_method !~ ^(GET|HEAD|OPTIONS)$) {
    set $hp_frozen "\${hp_frozen}w";
  }
  if ($hp_frozen = "fw") {
    return 503;
  }
  error_page 503 @hostplane_frozen;
  location @hostplane_frozen {
    add_header Retry-After 30 always;
    default_type text/plain;
    return 503 "This site is moving to another server: changes are paused for a few seconds. Try again shortly.\n";
  }
`;

/**
 * The per-install access log's format (usage from the server, issue 21): tab-separated time (epoch
 * seconds with milliseconds), status, bytes sent, the page cache's status (\`-\` when none), client
 * address. Read by access-log.ts.
 */
export const USAGE_LOG_FORMAT =
  "  log_format hostplane_usage '$msec\\t$status\\t$bytes_sent\\t$upstream_cache_status\\t$remote_addr';";

/** HOSTING_HTTP_PORT and HOSTING_HTTPS_PORT. */
export interface WebPorts {
  http: number;
  https: number;
}

/** The longest a reload is waited for (decision #234); past it the operation goes on as before. */
const RELOAD_WAIT_MS = 10_000;

/** What marks a server block file that listens for TLS (the main file then has a TLS default server). */
const tlsListen = (httpsPort: number) => `listen ${httpsPort} ssl;`;

function mainConf(paths: WebPaths, sitesDir: string, httpPort: number, httpsPort: number | null) {
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
${USAGE_LOG_FORMAT}
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
${httpsPort === null ? '' : tlsDefault(httpsPort)}  include ${sitesDir}/*.conf;
}
`;
}

/**
 * The install's FastCGI page cache (issue 21): its zone, at HOSTING_ROOT/web/cache/<slug> (http
 * context, before the server block). purgeCache `page` empties that directory: nginx answers a MISS
 * for an entry whose file is gone, so no reload is needed.
 */
export function cacheZone(slug: string, cacheRoot: string): string {
  const dir = configPath(path.join(cacheRoot, slug));
  return `fastcgi_cache_path ${dir} levels=1:2 keys_zone=${slug}:4m max_size=256m inactive=60m use_temp_path=off;`;
}

/**
 * What is never cached, as WordPress hosts do it: POSTs, query strings, WordPress's own endpoints
 * (admin, login, cron, XML-RPC, feeds) and requests with a logged-in, commenter or password cookie.
 */
export const CACHE_SKIP = `  set $hp_skip_cache 0;
  if ($request_method = POST) { set $hp_skip_cache 1; }
  if ($query_string != "") { set $hp_skip_cache 1; }
  if ($request_uri ~* "^/(wp-admin/|wp-[a-z-]+.php|xmlrpc.php|feed/)") { set $hp_skip_cache 1; }
  if ($http_cookie ~* "comment_author|wordpress_[a-f0-9]+|wp-postpass|wordpress_logged_in|wordpress_no_cache") { set $hp_skip_cache 1; }`;

/**
 * The PHP location's cache directives: the install's zone, the skip rules, `X-Cache-Status` (issue 29
 * defect 1). The key tells scheme, host and port apart, and holds the block's routing generation:
 * every routing change writes a new one, so no page built before it (from an old site URL) is
 * answered after it. Only 200s are kept, and never an answer with a `Location` (a redirect, whatever
 * its status or its cache headers): a redirect follows WordPress's home, which routing moves.
 */
export function cacheUse(slug: string, generation: string): string {
  if (!/^[0-9a-f]{1,32}$/.test(generation)) throw new Error(`not a cache generation: ${generation}`);
  return `    fastcgi_cache ${slug};
    fastcgi_cache_key "$scheme://$host:$server_port$request_uri $request_method ${generation}";
    fastcgi_cache_valid 200 10m;
    fastcgi_cache_bypass $hp_skip_cache;
    fastcgi_no_cache $hp_skip_cache $upstream_http_location;
    add_header X-Cache-Status $upstream_cache_status always;`;
}

/** A name no certificate of an install covers: the TLS handshake is refused (no certificate shown). */
const tlsDefault = (httpsPort: number) => `  server {
    listen ${httpsPort} ssl default_server;
    server_name _;
    ssl_reject_handshake on;
  }
`;

/** The ACME HTTP-01 answers: before any other location (`^~`), never redirected. */
const challengeLocation = (dir: string | undefined) =>
  dir === undefined
    ? ''
    : `  location ^~ /.well-known/acme-challenge/ {
    alias ${configPath(dir)}/;
    default_type text/plain;
  }
`;

/** What opens a server: where it listens, its names, its certificate (every value checked). */
function serverHead(listen: string, names: string[], tls?: { certificate: string; key: string }) {
  const head = `server {
  ${listen}
  server_name ${names.map(serverName).join(' ')};
`;
  if (!tls) return head;
  return `${head}  ssl_certificate ${configPath(tls.certificate)};
  ssl_certificate_key ${configPath(tls.key)};
`;
}

/** Every name the `server_name` directives of a configuration text list. */
function namesIn(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^\s*server_name\s+([^;]*);/gm))
    for (const n of (m[1] ?? '').split(/\s+/)) if (n) names.add(n);
  return names;
}

/** The comment that records a server block's site URL. */
const SITE_URL_MARK = '# site-url: ';

/** An origin a redirect answers with: scheme, host name, optional port, nothing else. */
function redirectTarget(target: string): string {
  const match = /^(https?):\/\/([^/:]+)(?::(\d{1,5}))?$/.exec(target);
  if (!match?.[1] || !match[2]) throw new Error(`not a redirect target: ${JSON.stringify(target)}`);
  return `${match[1]}://${serverName(match[2])}${match[3] ? `:${match[3]}` : ''}`;
}

/**
 * One install's server blocks (issue 21 routing): its site on HTTP for `names` (and over HTTPS for the
 * names a certificate covers), then its redirects (D5) on both. Every value is a validated name or path.
 */
export function serverBlock(
  block: ServerBlock,
  ports: WebPorts,
  paths: Pick<WebPaths, 'logs' | 'cache' | 'run'>,
): string {
  if (!/^hp_[0-9a-f]{32}$/.test(block.slug)) throw new Error(`not an install slug: ${block.slug}`);
  const http = `listen ${ports.http};`;
  const https = tlsListen(ports.https);
  const challenge = challengeLocation(block.challenges);
  const tls = block.tls ?? [];
  const covered = (names: string[]) =>
    tls.flatMap((t) => {
      const own = t.names.filter((n) => names.includes(n));
      return own.length > 0 ? [{ ...t, names: own }] : [];
    });
  const forward = block.forward === undefined ? null : forwardAddress(block.forward);
  const site = (head: string, tlsPort: number | null = null) =>
    forward === null
      ? `${head}${challenge}${siteBody(block, paths.logs, paths.run)}}\n`
      : `${head}${forwardBody(block.slug, forward, tlsPort, ports.http, paths.logs)}}\n`;
  const redirect = (head: string, target: string) =>
    `${head}${challenge}  location / {\n    return 301 ${redirectTarget(target)}$request_uri;\n  }\n}\n`;
  // D2: `$host` is one of the server's names (validated; nginx matched it), the port is ours.
  const toHttps = `https://$host${ports.https === 443 ? '' : `:${ports.https}`}`;
  const upgrade = (head: string) =>
    `${head}${challenge}  location / {\n    return 301 ${toHttps}$request_uri;\n  }\n}\n`;
  const secure = (block.secure ?? []).filter((n) => block.names.includes(n));
  const plain = block.names.filter((n) => !secure.includes(n));
  const parts = [
    `# Written by Hostplane for install ${block.slug}: do not edit, it is rewritten.\n${block.url === undefined ? '' : `${SITE_URL_MARK}${redirectTarget(block.url)}\n`}${cacheZone(block.slug, paths.cache)}\n`,
    ...(plain.length > 0 ? [site(serverHead(http, plain))] : []),
    ...(secure.length > 0 ? [upgrade(serverHead(http, secure))] : []),
    ...covered(block.names).map((t) => site(serverHead(https, t.names, t), ports.https)),
  ];
  for (const r of block.redirects ?? []) {
    if (r.names.length === 0) continue;
    parts.push(redirect(serverHead(http, r.names), r.target));
    for (const t of covered(r.names)) parts.push(redirect(serverHead(https, t.names, t), r.target));
  }
  return parts.join('');
}

/** An address a moved install's requests are passed to (decision #241), as nginx writes it. */
function forwardAddress(address: string): string {
  if (isIPv4(address)) return address;
  if (isIPv6(address)) return `[${address}]`;
  throw new Error(`not an address to forward to: ${JSON.stringify(address)}`);
}

/**
 * A moved install's site during its move's grace period (decision #241): every request, ACME's
 * challenges included, passed to its new server on the same scheme and port, the visitor's Host kept
 * and the name sent by SNI (the new server serves the same certificates). Not cached here. The hop is
 * encrypted; its certificate is not verified (the address is the control plane's record of the
 * fleet's server, and the certificate may come from a CA this server does not trust).
 */
function forwardBody(
  slug: string,
  address: string,
  httpsPort: number | null,
  httpPort: number,
  logs: string,
) {
  const upstream = httpsPort === null ? `http://${address}:${httpPort}` : `https://${address}:${httpsPort}`;
  return `  access_log ${configPath(path.join(logs, `${slug}.access.log`))} hostplane_usage;
  location / {
    proxy_pass ${upstream};
    proxy_set_header Host $http_host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_connect_timeout 5s;
    proxy_read_timeout 300s;
    proxy_buffering off;
    proxy_redirect off;
${httpsPort === null ? '' : '    proxy_ssl_server_name on;\n    proxy_ssl_name $host;\n    proxy_ssl_verify off;\n'}  }
`;
}

/** The page-cache generation a server block's text holds (its cache key's last word), or null. */
function generationIn(text: string): string | null {
  return /fastcgi_cache_key "[^"\n]* ([0-9a-f]{1,32})";/.exec(text)?.[1] ?? null;
}

/** The site itself inside a server block (its root, PHP through the install's pool, its page cache and access log). */
function siteBody(block: ServerBlock, logs: string, run: string): string {
  const root = configPath(block.documentRoot);
  const socket = configPath(block.socket);
  // Issue 31: a link a tenant plants (over SFTP, or from PHP) is followed only to its own files.
  return `  root ${root};
  disable_symlinks if_not_owner from=$document_root;
  index index.php index.html;
  access_log ${configPath(path.join(logs, `${block.slug}.access.log`))} hostplane_usage;
${frozenCheck(freezeFlag(run, block.slug))}${CACHE_SKIP}
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
${cacheUse(block.slug, block.cacheGeneration ?? '0')}
  }
`;
}

export function createWebServer(paths: WebPaths, ports: WebPorts) {
  for (const port of [ports.http, ports.https])
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error('bad HTTP(S) port');
  const httpPort = ports.http;
  /** The HTTPS port when a server block in `dir` listens on it (else null: nothing binds it). */
  const tlsPortOf = async (dir: string) => {
    const marker = tlsListen(ports.https);
    for (const name of await fs.readdir(dir).catch(() => [] as string[]))
      if (name.endsWith('.conf') && (await fs.readFile(path.join(dir, name), 'utf8')).includes(marker))
        return ports.https;
    return null;
  };
  // One change at a time on the machine (the candidate directory and nginx are shared), across every
  // process that runs the local driver here, not only this one's calls (decision 248).
  const serial = machineSerial(path.join(paths.run, 'nginx.lock'));

  async function prepare() {
    for (const dir of [paths.sites, paths.run, paths.logs, paths.tmp, paths.cache])
      await fs.mkdir(dir, { recursive: true });
  }

  /** The live main file, for the live server blocks (after a change is renamed in or removed). */
  async function writeMain() {
    await fs.writeFile(paths.nginxConf, mainConf(paths, paths.sites, httpPort, await tlsPortOf(paths.sites)));
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
    await fs.writeFile(conf, mainConf(paths, sites, httpPort, await tlsPortOf(sites)));
    try {
      await run(NGINX, ['-t', '-q', '-c', conf], { signal, env: TOOL_ENV });
    } catch (err) {
      // A refused configuration: a retry writes the same one (issue 29 defect 2).
      throw new ToolError(
        `nginx refused the new configuration, the running one is kept: ${(err as Error).message}`,
        true,
      );
    } finally {
      await files.remove(paths.candidate);
    }
  }

  /**
   * Starts nginx when it is not running, else reloads it (the live files were checked) and waits until
   * the reload has taken effect: a SIGHUP returns at once, and an operation that completed on it was
   * then served by the old configuration for a moment (a certificate's HTTPS port not yet bound under
   * load, seen in a CI rehearsal; decision #234).
   */
  async function startOrReload() {
    const master = await livePid(paths.nginxPid);
    const before = master ? await childrenOf(master) : null;
    await reloadOrStart(
      paths.nginxPid,
      'SIGHUP',
      NGINX,
      ['-c', paths.nginxConf],
      path.join(paths.logs, 'nginx-start.log'),
    );
    if (master && before && (await livePid(paths.nginxPid)) === master)
      await untilNewChild(master, before, RELOAD_WAIT_MS);
  }

  /**
   * Issue 28 finding 8 (D6), defence in depth behind the API (which routes a name on the one install
   * that verified it): a block naming a name another install's live block serves is never written.
   * nginx itself accepts a duplicate `server_name` and serves it from the first file in name order.
   */
  async function refuseTaken(slug: string, text: string) {
    const wanted = namesIn(text);
    for (const file of (await fs.readdir(paths.sites)).sort()) {
      if (!file.endsWith('.conf') || file === `${slug}.conf`) continue;
      const other = namesIn(await fs.readFile(path.join(paths.sites, file), 'utf8').catch(() => ''));
      const taken = [...wanted].filter((n) => other.has(n));
      if (taken.length > 0)
        throw new Error(
          `${taken.join(', ')} ${taken.length === 1 ? 'is' : 'are'} served by ${file.slice(0, -'.conf'.length)}: a name is served by one install only; the running configuration is kept`,
        );
    }
  }

  /** The install's writes frozen or not (decision #245): its flag file, tested by its live blocks. */
  async function setFrozen(block: ServerBlock) {
    const flag = freezeFlag(paths.run, block.slug);
    if (block.frozen === true && block.forward === undefined) await fs.writeFile(flag, '', { mode: 0o644 });
    else await fs.rm(flag, { force: true });
  }

  return {
    /**
     * Writes (or rewrites) an install's server block: checked, renamed in, reloaded. `beforeSwap`
     * runs once the new configuration passed its checks, before it goes live (routing sets WordPress's
     * site URL there, so no request reaches the new block while WordPress still has the old URL).
     */
    put: (block: ServerBlock, signal: AbortSignal, beforeSwap?: () => Promise<boolean | undefined>) =>
      serial(async () => {
        await prepare();
        const text = serverBlock(block, ports, paths);
        const live = path.join(paths.sites, `${block.slug}.conf`);
        // Decision #244: the same blocks as the live ones but for their page-cache generation, and
        // WordPress's site URL unchanged: nothing to reload (a reload of nginx can drop a request of
        // any site of the server as its old workers close their connections).
        const current = await fs.readFile(live, 'utf8').catch(() => null);
        const kept = current === null ? null : generationIn(current);
        // The live blocks passed their checks already: the site URL is set before deciding.
        const urlSet =
          current !== null &&
          kept !== null &&
          serverBlock({ ...block, cacheGeneration: kept }, ports, paths) === current &&
          (await livePid(paths.nginxPid)) !== null;
        if (urlSet && (await beforeSwap?.()) === false) return setFrozen(block);
        await refuseTaken(block.slug, text);
        await check({ slug: block.slug, text }, signal);
        if (!urlSet) await beforeSwap?.();
        const temp = path.join(paths.sites, `.${block.slug}.conf.tmp`);
        await fs.writeFile(temp, text);
        await fs.rename(temp, live);
        await writeMain();
        await startOrReload();
        await setFrozen(block);
      }),

    /** Removes an install's server block (when there is one) and reloads. */
    remove: (slug: string, signal: AbortSignal) =>
      serial(async () => {
        const live = path.join(paths.sites, `${slug}.conf`);
        if (!(await files.exists(live))) return;
        await prepare();
        await check({ slug, text: null }, signal);
        await fs.rm(live, { force: true });
        await fs.rm(freezeFlag(paths.run, slug), { force: true });
        await writeMain();
        await startOrReload();
      }),

    running: () => livePid(paths.nginxPid),

    /** The names the install's live server block file answers for (every server of it, HTTP or HTTPS). */
    async servedNames(slug: string): Promise<Set<string>> {
      return namesIn(await fs.readFile(path.join(paths.sites, `${slug}.conf`), 'utf8').catch(() => ''));
    },

    /** The site URL the install's live server block file records (null: none, or no file). */
    async siteUrlOf(slug: string): Promise<string | null> {
      const text = await fs.readFile(path.join(paths.sites, `${slug}.conf`), 'utf8').catch(() => '');
      const line = text.split('\n').find((l) => l.startsWith(SITE_URL_MARK));
      if (!line) return null;
      try {
        return redirectTarget(line.slice(SITE_URL_MARK.length).trim());
      } catch {
        return null;
      }
    },

    /**
     * Starts nginx from the live configuration when it is not running (the main file rewritten first,
     * then checked); a running nginx is left alone.
     */
    ensureRunning: () =>
      serial(async () => {
        if (await livePid(paths.nginxPid)) return;
        await prepare();
        await writeMain();
        await run(NGINX, ['-t', '-q', '-c', paths.nginxConf], {
          signal: AbortSignal.timeout(30_000),
          env: TOOL_ENV,
        });
        await startOrReload();
      }),
  };
}
