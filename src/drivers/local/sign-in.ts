import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { CallContext, InstallRef } from '../driver.js';
import type { LocalContext } from './context.js';
import { pathsOf, systemUser, webPaths } from './names.js';
import { output, TOOL_ENV } from './run.js';
import { PHP_CLI } from './wordpress.js';

/**
 * Issue 29 (defect 7): single-use sign-in links to an install's wp-admin (docs/decisions.md #148).
 *
 * A must-use plugin of Hostplane's (wp-content/mu-plugins/hostplane-sign-in.php) accepts
 * `wp-login.php?hostplane_sign_in=<token>` once: the token's SHA-256, the WordPress user, the
 * database it was made for and its expiry are a row of the install's own database
 * (`<prefix>hostplane_sign_in`); the request whose DELETE removes the row signs the user in
 * (`wp_set_auth_cookie`) and is sent to wp-admin; a used, expired, unknown or copied token (a row that
 * came with a copy of another install's database: `db_name` is not this site's DB_NAME) answers 403.
 * The token itself (256 random bits) is only in the link: neither the driver nor the control plane
 * stores it. Plugin and row are written by a PHP script run as the install's own user (the tenant file
 * model: root writes nothing into the tree); the script's file and the plugin's text are root's, the
 * values reach PHP through the environment.
 */

/** The must-use plugin: answers the link once, then only 403. */
export const SIGN_IN_PLUGIN = `<?php
/*
 * Plugin Name: Hostplane sign-in links
 * Description: Single-use sign-in links made by Hostplane (POST /v1/installs/{id}/wordpress_sign_in). Written by Hostplane; changes are overwritten.
 */
if (!defined('ABSPATH')) {
  exit;
}
function hostplane_sign_in() {
  if (!isset($_GET['hostplane_sign_in'])) {
    return;
  }
  nocache_headers();
  $token = is_string($_GET['hostplane_sign_in']) ? $_GET['hostplane_sign_in'] : '';
  $user = false;
  if (preg_match('/^[A-Za-z0-9_-]{43}$/', $token)) {
    global $wpdb;
    $table = $wpdb->base_prefix . 'hostplane_sign_in';
    $hash = hash('sha256', $token);
    $quiet = $wpdb->suppress_errors(true);
    $row = $wpdb->get_row($wpdb->prepare("SELECT username, db_name, expires_at FROM \`$table\` WHERE token_hash = %s", $hash));
    // Single use: only the request whose DELETE removed the row goes on.
    $taken = $row ? $wpdb->query($wpdb->prepare("DELETE FROM \`$table\` WHERE token_hash = %s", $hash)) : 0;
    $wpdb->suppress_errors($quiet);
    if ($taken === 1 && (int) $row->expires_at >= time() && hash_equals((string) DB_NAME, (string) $row->db_name)) {
      $user = get_user_by('login', $row->username);
    }
  }
  if (!$user) {
    wp_die('This sign-in link has been used or has expired. Ask Hostplane for a new one.', 'Sign-in link refused', array('response' => 403));
  }
  wp_set_current_user($user->ID);
  wp_set_auth_cookie($user->ID, false, is_ssl());
  wp_safe_redirect(admin_url());
  exit;
}
add_action('init', 'hostplane_sign_in', 0);
`;

/** Writes the plugin (when it differs) and the token's row as the install's user; prints the site URL. */
const MAKE_TOKEN = `<?php
// Written by Hostplane (local driver): a single-use sign-in token, run as the install's user.
define('WP_INSTALLING', true);
$_SERVER['HTTP_HOST'] = 'localhost';
$_SERVER['REQUEST_URI'] = '/';
$_SERVER['SERVER_PROTOCOL'] = 'HTTP/1.1';
umask(027);
function hostplane_fail($code, $message) {
  fwrite(STDERR, $message . "\\n");
  exit($code);
}
require getenv('HP_DOCROOT') . '/wp-load.php';
if (!is_blog_installed()) {
  hostplane_fail(3, 'WordPress is not installed');
}
$username = getenv('HP_USERNAME');
if (!get_user_by('login', $username)) {
  hostplane_fail(4, 'WordPress has no user ' . $username);
}
$dir = WP_CONTENT_DIR . '/mu-plugins';
if (!is_dir($dir) && !mkdir($dir, 0750)) {
  hostplane_fail(5, 'cannot make ' . $dir);
}
$plugin = $dir . '/hostplane-sign-in.php';
$source = getenv('HP_PLUGIN');
if (@file_get_contents($plugin) !== $source) {
  $temp = $dir . '/.hostplane-sign-in.php.tmp';
  @unlink($temp);
  if (file_put_contents($temp, $source) === false || !chmod($temp, 0640) || !rename($temp, $plugin)) {
    hostplane_fail(5, 'cannot write ' . $plugin);
  }
}
global $wpdb;
$table = $wpdb->base_prefix . 'hostplane_sign_in';
$wpdb->query("CREATE TABLE IF NOT EXISTS \`$table\` (token_hash CHAR(64) NOT NULL PRIMARY KEY, username VARCHAR(60) NOT NULL, db_name VARCHAR(64) NOT NULL, expires_at BIGINT NOT NULL) DEFAULT CHARSET=ascii");
$wpdb->query($wpdb->prepare("DELETE FROM \`$table\` WHERE expires_at < %d", time()));
$stored = $wpdb->insert($table, array(
  'token_hash' => getenv('HP_TOKEN_HASH'),
  'username' => $username,
  'db_name' => DB_NAME,
  'expires_at' => (int) getenv('HP_EXPIRES'),
), array('%s', '%s', '%s', '%d'));
if ($stored !== 1) {
  hostplane_fail(6, 'the sign-in token was not stored: ' . $wpdb->last_error);
}
echo "\\nHOSTPLANE_SITEURL=", get_option('siteurl'), "\\n";
`;

/** WordPress user names (sanitize_user's strict set), as the API passes them. */
const USERNAME = /^[A-Za-z0-9_.@ -]{1,60}$/;

/** Runs the PHP CLI as the install's user; answers its standard output. */
function runAsInstall(user: string, script: string, env: Record<string, string>, signal: AbortSignal) {
  return output('runuser', ['-u', user, '--', PHP_CLI, script], signal, { ...TOOL_ENV, ...env });
}

/** The site URL the script printed last (tenant code may print too: only a well-formed http(s) URL counts). */
function siteUrlOf(stdout: string): URL | null {
  const line = stdout
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('HOSTPLANE_SITEURL='));
  if (!line) return null;
  try {
    const url = new URL(line.slice('HOSTPLANE_SITEURL='.length).trim());
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}

export function signInOperations(ctx: LocalContext) {
  const script = path.join(webPaths(ctx.hostingRoot).root, 'wp-sign-in.php');
  return {
    /**
     * Not recorded per key (local_tasks): the answer holds the link's secret. A call asked again with
     * the same key makes another link; an unused one expires on its own.
     */
    async signInLink(
      call: CallContext,
      input: { install: InstallRef; username: string; ttl_seconds: number },
    ): Promise<{ done: true; value: { url: string; expires_at: string } }> {
      if (!USERNAME.test(input.username)) throw new Error(`not a WordPress user name: ${input.username}`);
      const ttl = Math.max(10, Math.min(3600, Math.floor(input.ttl_seconds)));
      const { public: documentRoot } = pathsOf(ctx.hostingRoot, input.install.id);
      await fs.mkdir(path.dirname(script), { recursive: true });
      await fs.writeFile(script, MAKE_TOKEN, { mode: 0o644 });
      const token = randomBytes(32).toString('base64url');
      // WordPress compares the expiry with this machine's time, not the control plane's clock.
      const expires = Math.floor(Date.now() / 1000) + ttl;
      let stdout: string;
      try {
        stdout = await runAsInstall(
          systemUser(input.install.id),
          script,
          {
            HP_DOCROOT: documentRoot,
            HP_USERNAME: input.username,
            HP_TOKEN_HASH: createHash('sha256').update(token).digest('hex'),
            HP_EXPIRES: String(expires),
            HP_PLUGIN: SIGN_IN_PLUGIN,
          },
          call.signal,
        );
      } catch (err) {
        throw new Error(`the WordPress sign-in link could not be made: ${(err as Error).message}`);
      }
      const site = siteUrlOf(stdout);
      if (!site) throw new Error('WordPress did not tell its site URL');
      const url = new URL(`${site.origin}${site.pathname.replace(/\/+$/, '')}/wp-login.php`);
      url.searchParams.set('hostplane_sign_in', token);
      return {
        done: true,
        value: { url: url.toString(), expires_at: new Date(expires * 1000).toISOString() },
      };
    },
  };
}
