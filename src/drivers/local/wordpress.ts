import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import * as files from './files.js';
import { output, run, TOOL_ENV } from './run.js';
import * as tenant from './tenant.js';

/**
 * WordPress for the local driver's installs (issue 21): core copied from Debian's `wordpress` package,
 * a `wp-config.php` of the install's own (Debian's reads /etc/wordpress), WordPress's installer run
 * by the PHP CLI as the install's system user, and that user itself (`useradd --system`).
 */

export const WORDPRESS_CORE = '/usr/share/wordpress';
export const PHP_CLI = '/usr/bin/php8.2';
/**
 * Issue 28 finding 9a: the longest a PHP run in an install's tree (its installer, its site URL) may
 * take. The tree is the tenant's (a FIFO where WordPress reads blocks its PHP): a job waits this
 * long, not until its expiry.
 */
const PHP_RUN_MS = 120_000;

/** A PHP single-quoted string literal. */
export function phpString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** What of Debian's tree is not copied: its wp-config.php (ours is written) and its 31 MB of languages. */
const NOT_COPIED = new Set(['wp-config.php', path.join('wp-content', 'languages')]);

/**
 * Copies WordPress core into an empty (or placeholder-only) document root; Debian's wp-config and
 * languages stay out. One `cp -rL` of the entries (links followed: Debian links some files to
 * /usr/share/javascript and the like), about a tenth of `fs.cp`'s time on its ~3,000 files (issue 21,
 * provisioning to first 200), into a staging directory beside the document root; the entries are then
 * renamed in with `wp-settings.php` last, so a crash part-way leaves no `wp-settings.php` (the mark a
 * retry looks for) and the retry copies again. Issue 28: every step inside the trees runs as the
 * document root's owner (root while the tree is still root's, at first provisioning).
 */
export async function copyCore(documentRoot: string, signal: AbortSignal) {
  const owner = await tenant.ownerOf(documentRoot);
  if (!owner) throw new Error(`no document root at ${documentRoot}`);
  const staging = path.join(path.dirname(documentRoot), '.core-staging');
  await tenant.removeTree(staging, signal);
  await tenant.makeTreeDir(staging, owner);
  await tenant.runAs(owner, 'mkdir', ['-p', '--', path.join(staging, 'wp-content', 'uploads')], signal);
  const sources: string[] = [];
  for (const name of await fs.readdir(WORDPRESS_CORE)) {
    if (!NOT_COPIED.has(name) && name !== 'wp-content') sources.push(path.join(WORDPRESS_CORE, name));
  }
  const content = path.join(WORDPRESS_CORE, 'wp-content');
  const contentSources = (await fs.readdir(content))
    .filter((name) => !NOT_COPIED.has(path.join('wp-content', name)))
    .map((name) => path.join(content, name));
  await tenant.runAs(owner, 'cp', ['-rL', '--', ...sources, `${staging}/`], signal);
  if (contentSources.length > 0)
    await tenant.runAs(
      owner,
      'cp',
      ['-rL', '--', ...contentSources, `${path.join(staging, 'wp-content')}/`],
      signal,
    );
  const names = (await fs.readdir(staging)).sort(
    (a, b) => Number(a === 'wp-settings.php') - Number(b === 'wp-settings.php'),
  );
  // One shell as the owner moves them in (the names are arguments, never shell code).
  await tenant.runAs(
    owner,
    '/bin/sh',
    [
      '-c',
      'set -e; d="$1"; s="$2"; shift 2; rm -f -- "$d/index.html"; for n do rm -rf -- "$d/$n"; mv -T -- "$s/$n" "$d/$n"; done',
      'sh',
      documentRoot,
      staging,
      ...names,
    ],
    signal,
  );
  await tenant.removeTree(staging, signal);
}

export interface WpConfig {
  dbName: string;
  dbUser: string;
  dbPassword: string;
  dbHost: string;
  tablePrefix: string;
}

const SALTS = [
  'AUTH_KEY',
  'SECURE_AUTH_KEY',
  'LOGGED_IN_KEY',
  'NONCE_KEY',
  'AUTH_SALT',
  'SECURE_AUTH_SALT',
  'LOGGED_IN_SALT',
  'NONCE_SALT',
];

/**
 * Issue 28: the salts of an install's current wp-config.php (as this driver writes them: base64url),
 * so rewriting it keeps its visitors' sessions; a missing or foreign one is made anew.
 */
export function saltsOf(text: string): Record<string, string> {
  const salts: Record<string, string> = {};
  for (const key of SALTS) {
    const m = new RegExp(`define\\('${key}', '([A-Za-z0-9_-]{32,128})'\\);`).exec(text);
    if (m?.[1]) salts[key] = m[1];
  }
  return salts;
}

export function wpConfig(c: WpConfig, salts: Record<string, string> = {}): string {
  if (!/^[A-Za-z0-9_]{1,20}$/.test(c.tablePrefix)) throw new Error('bad table prefix');
  const define = (name: string, value: string) => `define(${phpString(name)}, ${phpString(value)});`;
  return `<?php
// Written by Hostplane (local driver): the install's own database and keys.
${define('DB_NAME', c.dbName)}
${define('DB_USER', c.dbUser)}
${define('DB_PASSWORD', c.dbPassword)}
${define('DB_HOST', c.dbHost)}
${define('DB_CHARSET', 'utf8mb4')}
${define('DB_COLLATE', '')}
${SALTS.map((k) => define(k, salts[k] ?? randomBytes(48).toString('base64url'))).join('\n')}
$table_prefix = ${phpString(c.tablePrefix)};
define('WP_DEBUG', false);
// Issue 28: what WordPress writes itself (updates, plugins) stays out of other users' reach.
define('FS_CHMOD_DIR', 0750);
define('FS_CHMOD_FILE', 0640);
if (!defined('ABSPATH')) {
  define('ABSPATH', __DIR__ . '/');
}
require_once ABSPATH . 'wp-settings.php';
`;
}

/**
 * Writes wp-config.php, mode 0640, as the document root's owner (issue 28: a link or FIFO a tenant
 * put at that name is replaced, never written through by root; tenant.ts).
 */
export async function writeWpConfig(documentRoot: string, config: WpConfig, signal: AbortSignal) {
  const owner = await tenant.ownerOf(documentRoot);
  if (!owner) throw new Error(`no document root at ${documentRoot}`);
  const file = path.join(documentRoot, 'wp-config.php');
  await tenant.writeTreeFile(
    owner,
    file,
    wpConfig(config, saltsOf((await tenant.readRegular(file))?.toString('utf8') ?? '')),
    0o640,
    signal,
  );
}

/** The numeric uid and gid of a system user. */
export async function idsOf(user: string, signal = AbortSignal.timeout(10_000)) {
  const uid = Number((await output('id', ['-u', user], signal)).trim());
  const gid = Number((await output('id', ['-g', user], signal)).trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`no ids for ${user}`);
  return { uid, gid };
}

/** What an install's user runs with (issue 28): its group (nginx's workers) reads what it writes. */
export const INSTALL_UMASK = 0o027;

/**
 * Issue 28: the install's document root to the tenant model's modes (directories 0750, files 0640,
 * no setuid/setgid bit) and its private directory to its user only, by `chmod -R` run as the install's
 * own user (root never walks the tenant's tree). Safe to run again.
 */
export async function restrictTree(publicDir: string, privateDir: string, user: string, signal: AbortSignal) {
  for (const [dir, modes] of [
    [publicDir, 'u=rwX,g=rX,o=,-s'],
    [privateDir, 'u=rwX,go=,-s'],
  ] as const) {
    if (!(await files.exists(dir))) continue;
    await run('runuser', ['-u', user, '--', 'chmod', '-R', modes, '--', dir], { signal, env: TOOL_ENV });
  }
}

/** Writes one of the web tier's PHP scripts, readable by the install users that run it (0644, root's). */
async function writeScript(file: string, text: string) {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.tmp`;
  await fs.writeFile(temp, text, { mode: 0o644 });
  await fs.chmod(temp, 0o644);
  await fs.rename(temp, file);
}

/** The installer the PHP CLI runs; every value comes from the environment, none is spliced in. */
const INSTALLER = `<?php
define('WP_INSTALLING', true);
$_SERVER['HTTP_HOST'] = getenv('HP_HOST');
$_SERVER['REQUEST_URI'] = '/';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
require getenv('HP_DOCROOT') . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
if (!is_blog_installed()) {
  wp_install(getenv('HP_TITLE'), getenv('HP_ADMIN_USER'), getenv('HP_ADMIN_EMAIL'), true, '', getenv('HP_ADMIN_PASSWORD'));
}
update_option('siteurl', getenv('HP_URL'));
update_option('home', getenv('HP_URL'));
echo "installed\\n";
`;

export interface InstallerInput {
  documentRoot: string;
  installer: string;
  user: string;
  title: string;
  adminEmail: string;
  /** The site's URL (`http://<cname>[:port]`). */
  url: string;
  /** Issue 21: the owner's administrator (its password made and kept sealed by the driver). */
  adminUser: string;
  adminPassword: string;
  signal: AbortSignal;
}

/** The account owner's WordPress administrator (issue 21). */
export const ADMIN_USER = 'admin';

/**
 * Runs WordPress's installer as the install's user: the site title, an administrator for the account
 * owner with the driver's password (passed in the environment, never on a command line or in a file).
 * Idempotent: an installed site only gets its URL set again (its administrator is the first run's).
 */
export async function runInstaller(input: InstallerInput) {
  await writeScript(input.installer, INSTALLER);
  const url = new URL(input.url);
  await run('runuser', ['-u', input.user, '--', PHP_CLI, input.installer], {
    signal: AbortSignal.any([input.signal, AbortSignal.timeout(PHP_RUN_MS)]),
    umask: INSTALL_UMASK,
    env: {
      ...TOOL_ENV,
      HP_HOST: url.host,
      HP_URL: url.origin,
      HP_DOCROOT: input.documentRoot,
      HP_TITLE: input.title,
      HP_ADMIN_USER: input.adminUser,
      HP_ADMIN_EMAIL: input.adminEmail,
      HP_ADMIN_PASSWORD: input.adminPassword,
    },
  });
}

/** Sets home and siteurl through WordPress itself (its table prefix, its caches); the URL from the environment. */
const SITE_URL = `<?php
define('WP_INSTALLING', true);
$_SERVER['HTTP_HOST'] = getenv('HP_HOST');
$_SERVER['REQUEST_URI'] = '/';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
require getenv('HP_DOCROOT') . '/wp-load.php';
$changed = false;
if (is_blog_installed()) {
  $changed = update_option('siteurl', getenv('HP_URL')) || $changed;
  $changed = update_option('home', getenv('HP_URL')) || $changed;
}
echo get_option('home'), "\n", $changed ? 'changed' : 'same', "\n";
`;

/**
 * Issue 21 routing: WordPress's home and siteurl become `url` (the primary domain's, or the default
 * name's). Answers whether either changed (decision #244; true when the script's answer is unreadable).
 */
export async function setSiteUrl(input: {
  documentRoot: string;
  script: string;
  user: string;
  url: string;
  signal: AbortSignal;
}): Promise<boolean> {
  await writeScript(input.script, SITE_URL);
  const url = new URL(input.url);
  // The script's answer goes to a file of root's beside it (root writes it: the pipe is root's).
  const answer = `${input.script}.${randomBytes(8).toString('hex')}.out`;
  try {
    await run('runuser', ['-u', input.user, '--', PHP_CLI, input.script], {
      signal: AbortSignal.any([input.signal, AbortSignal.timeout(PHP_RUN_MS)]),
      umask: INSTALL_UMASK,
      env: { ...TOOL_ENV, HP_HOST: url.host, HP_URL: url.origin, HP_DOCROOT: input.documentRoot },
      stdout: answer,
    });
    const text = await fs.readFile(answer, 'utf8').catch(() => '');
    return text.split('\n')[1]?.trim() !== 'same';
  } finally {
    await fs.rm(answer, { force: true });
  }
}

/** The PHP version that serves the install (`8.2.x`). */
export async function phpVersion(signal: AbortSignal): Promise<string | null> {
  const text = await output(PHP_CLI, ['-r', 'echo PHP_VERSION;'], signal);
  return /^\d+\.\d+\.\d+/.exec(text.trim())?.[0] ?? null;
}

export async function userExists(user: string) {
  try {
    await output('id', ['-u', user], AbortSignal.timeout(10_000));
    return true;
  } catch {
    return false;
  }
}

/** The web server's user: a supplementary member of each install's group (it reads their trees). */
export const WEB_USER = 'www-data';

/**
 * The install's system user and group (no home, no shell), made when absent, with nginx's user a
 * member of its group (issue 28: the document root is 0750/0640, readable by the group only; nginx's
 * workers get the group at their next start, the reload that follows).
 */
export async function ensureUser(user: string, signal: AbortSignal) {
  if (!(await userExists(user)))
    await run(
      'useradd',
      ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', user],
      { signal, env: TOOL_ENV },
    );
  await addWebUserTo([user], signal);
}

/** Adds nginx's user to each group it is not in yet; answers whether any was added. */
export async function addWebUserTo(groups: string[], signal: AbortSignal): Promise<boolean> {
  const current = new Set((await output('id', ['-nG', WEB_USER], signal)).trim().split(/\s+/));
  const missing = groups.filter((g) => !current.has(g));
  if (missing.length === 0) return false;
  await run('usermod', ['--append', '--groups', missing.join(','), WEB_USER], { signal, env: TOOL_ENV });
  return true;
}

/** The pids of the live processes whose real or effective uid is `uid` (from /proc). */
export async function processesOf(uid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const status = await fs.readFile(path.join('/proc', name, 'status'), 'utf8').catch(() => '');
    const ids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status);
    if (ids && (Number(ids[1]) === uid || Number(ids[2]) === uid)) pids.push(Number(name));
  }
  return pids;
}

/**
 * Removes the install's user and group. Issue 28 finding 10: `userdel` refuses while a process of the
 * user lives (a cron run, a shell a plugin left, a pool child): the caller stops its pool first, then
 * what remains of the uid is killed (SIGKILL, again until none is left: a process may fork meanwhile).
 */
/**
 * The install's own group (`useradd --user-group`), which `userdel` leaves while nginx's user is a
 * member of it: removed, so that deleted installs give their system GID back (Debian has 900; each
 * install deleted kept one until `useradd` found none). Only a name of an install user's shape.
 */
async function removeGroup(user: string, signal: AbortSignal) {
  if (!/^hp[0-9a-f]{30}$/.test(user)) return;
  const groups = await fs.readFile('/etc/group', 'utf8').catch(() => '');
  if (!groups.split('\n').some((line) => line.startsWith(`${user}:`))) return;
  await run('groupdel', [user], { signal, env: TOOL_ENV });
}

export async function removeUser(user: string, signal: AbortSignal) {
  // A user removed by an earlier version may have left its group.
  if (!(await userExists(user))) return removeGroup(user, signal);
  const { uid } = await idsOf(user, signal);
  if (uid === 0) throw new Error(`refusing to remove ${user}: uid 0`);
  // Issue 30 (decision #197): a process in another network namespace is another hosting server's
  // sharing this machine's user database (the fleet's test servers): neither killed nor the user removed.
  const here = await fs.readlink('/proc/self/ns/net').catch(() => null);
  const ours = async (pid: number) =>
    here === null || (await fs.readlink(`/proc/${pid}/ns/net`).catch(() => here)) === here;
  for (let round = 0; round < 50; round++) {
    const all = await processesOf(uid);
    const pids: number[] = [];
    for (const pid of all) if (await ours(pid)) pids.push(pid);
    if (pids.length < all.length && pids.length === 0) return;
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  // Issue 31 (decision 185): the install's login entries (its name, same uid, Hostplane's comment) first.
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , id, , comment] = line.split(':');
    if (name && name !== user && Number(id) === uid && comment?.startsWith('hostplane login '))
      await run('userdel', ['--force', name], { signal, env: TOOL_ENV });
  }
  await run('userdel', [user], { signal, env: TOOL_ENV });
  await removeGroup(user, signal);
}

/**
 * Gives the install's user its tree (WordPress writes uploads, PHP its sessions) once, while the tree
 * is still root's (made by the driver, never reachable by a tenant). Issue 28: a tree whose top is
 * already someone else's is left alone: root never walks (nor chowns in) a tenant's tree.
 */
export async function chownTree(dir: string, user: string, signal: AbortSignal) {
  const owner = await tenant.ownerOf(dir);
  if (owner?.uid !== 0) return;
  await run('chown', ['-R', '--no-dereference', `${user}:${user}`, dir], { signal, env: TOOL_ENV });
}
