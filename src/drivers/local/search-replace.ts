import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { MariaDb } from './database.js';
import { databaseNames, systemUser } from './names.js';
import { run, TOOL_ENV } from './run.js';
import { PHP_CLI } from './wordpress.js';

/**
 * C1-C4 (issue 21): after a copy's tables are loaded into the destination's staging database, every
 * occurrence of the source's URLs is replaced by the destination's, as `wp search-replace` does it:
 * in PHP, row by row, a PHP-serialized value unserialized, replaced recursively and serialized again
 * (its string lengths right), never by SQL REPLACE on serialized data. Only the tables of the copied
 * set with the install's table prefix are touched; a table without a primary key is skipped (as
 * WP-CLI does), and so is a serialized object whose class is not loaded (left as it was).
 */

/**
 * The script the PHP CLI runs (read from its standard input); every value comes from the
 * environment, none is spliced in. Issue 28 finding 10: it refuses to run as root.
 */
const SCRIPT = `<?php
if (posix_geteuid() === 0) { fwrite(STDERR, "search-replace: refusing to run as root\\n"); exit(2); }
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
$pairs = json_decode(getenv('HP_PAIRS'), true);
$prefix = getenv('HP_PREFIX');
$db = new mysqli(getenv('HP_DB_HOST'), getenv('HP_DB_USER'), getenv('HP_DB_PASSWORD'), getenv('HP_DB_NAME'), (int) getenv('HP_DB_PORT'));
$db->set_charset('utf8mb4');
$from = array_column($pairs, 0);
// In order; a host name ends where no host-name character (nor a port) follows.
$map = [];
foreach ($pairs as $pair) {
  $to = $pair[1];
  $map['/' . preg_quote($pair[0], '/') . '(?![A-Za-z0-9_-]|\\.[A-Za-z0-9]|:[0-9])/'] = function () use ($to) { return $to; };
}

function hp_replace($value, $map, &$changed) {
  if (is_string($value)) {
    if ($value !== 'b:0;') {
      $data = @unserialize($value, ['allowed_classes' => false]);
      if ($data !== false && !($data instanceof __PHP_Incomplete_Class)) {
        $inner = false;
        $data = hp_walk($data, $map, $inner);
        if ($inner) { $changed = true; return serialize($data); }
        return $value;
      }
    }
    $next = preg_replace_callback_array($map, $value);
    if ($next === null) throw new RuntimeException('replacement failed: ' . preg_last_error_msg());
    if ($next !== $value) $changed = true;
    return $next;
  }
  return $value;
}

function hp_walk($data, $map, &$changed) {
  if (is_string($data)) return hp_replace($data, $map, $changed);
  if (is_array($data)) {
    foreach ($data as $k => $v) $data[$k] = hp_walk($v, $map, $changed);
    return $data;
  }
  if ($data instanceof stdClass) {
    foreach (get_object_vars($data) as $k => $v) $data->$k = hp_walk($v, $map, $changed);
    return $data;
  }
  return $data;
}

$quote = function ($name) { return '\`' . str_replace('\`', '\`\`', $name) . '\`'; };
$total = 0;
$tables = $db->query('SHOW FULL TABLES WHERE Table_type = "BASE TABLE"')->fetch_all(MYSQLI_NUM);
foreach ($tables as $row) {
  $table = $row[0];
  if (strncmp($table, $prefix, strlen($prefix)) !== 0) continue;
  $keys = [];
  $text = [];
  foreach ($db->query('SHOW COLUMNS FROM ' . $quote($table))->fetch_all(MYSQLI_ASSOC) as $col) {
    if ($col['Key'] === 'PRI') $keys[] = $col['Field'];
    if (preg_match('/char|text|blob|enum|set/i', $col['Type'])) $text[] = $col['Field'];
  }
  if (!$keys || !$text) continue;
  $likes = [];
  foreach ($text as $c) foreach ($from as $f) $likes[] = $quote($c) . " LIKE '%" . $db->real_escape_string(addcslashes($f, '%_\\\\')) . "%'";
  $cols = array_unique(array_merge($keys, $text));
  $result = $db->query('SELECT ' . implode(', ', array_map($quote, $cols)) . ' FROM ' . $quote($table) . ' WHERE ' . implode(' OR ', $likes), MYSQLI_USE_RESULT);
  $rows = $result->fetch_all(MYSQLI_ASSOC);
  $result->free();
  foreach ($rows as $r) {
    $set = [];
    $values = [];
    foreach ($text as $c) {
      if ($r[$c] === null) continue;
      $changed = false;
      $next = hp_replace($r[$c], $map, $changed);
      if ($changed) { $set[] = $quote($c) . ' = ?'; $values[] = $next; }
    }
    if (!$set) continue;
    $where = [];
    foreach ($keys as $k) { $where[] = $quote($k) . ' = ?'; $values[] = $r[$k]; }
    $stmt = $db->prepare('UPDATE ' . $quote($table) . ' SET ' . implode(', ', $set) . ' WHERE ' . implode(' AND ', $where));
    $stmt->bind_param(str_repeat('s', count($values)), ...$values);
    $stmt->execute();
    $total++;
  }
}
echo json_encode(['rows' => $total, 'uid' => posix_geteuid()]), "\\n";
`;

/** HOSTING_HTTP_PORT and HOSTING_HTTPS_PORT: a source's links may carry either. */
export interface SourcePorts {
  http: number;
  https: number;
}

/**
 * The pairs a copy replaces (C1-C4, issue 21), in the order they apply: every host name of the source
 * (its default name and its domains, redirecting ones included) to the destination's site URL (its
 * primary's, `http(s)://host[:port]`). First the absolute forms, each scheme with its port and
 * without one (`http://a.example:8080`, `https://a.example`), to the destination's URL with its
 * scheme; then the scheme-relative ones (`//a.example[:port]`) to `//<destination host[:port]>`; each
 * also JSON-escaped (`\/\/`, as block content stores it). A pair matches only where the host name
 * ends (the script's look-ahead: `a.example` is not `a.example.org`, nor `a.example:9999`). A bare
 * host name (without `//`) is never replaced.
 */
export function urlPairs(
  sourceNames: string[],
  ports: SourcePorts,
  destinationUrl: string,
): [string, string][] {
  const to = new URL(destinationUrl);
  const origin = `${to.protocol}//${to.host}`;
  const withPort = (scheme: 'http' | 'https', name: string) => {
    const port = ports[scheme];
    return port === (scheme === 'http' ? 80 : 443) ? null : `${name}:${port}`;
  };
  const names = [...new Set(sourceNames.filter((n) => !n.startsWith('*.')))];
  const absolute: [string, string][] = [];
  const relative: [string, string][] = [];
  for (const name of names) {
    for (const scheme of ['http', 'https'] as const) {
      const hosted = withPort(scheme, name);
      if (hosted) absolute.push([`${scheme}://${hosted}`, origin]);
    }
    absolute.push([`http://${name}`, origin], [`https://${name}`, origin]);
    for (const scheme of ['http', 'https'] as const) {
      const hosted = withPort(scheme, name);
      if (hosted) relative.push([`//${hosted}`, `//${to.host}`]);
    }
    relative.push([`//${name}`, `//${to.host}`]);
  }
  const pairs = [...absolute, ...relative].filter(([a, b]) => a !== b);
  const unique = pairs.filter(([a], i) => pairs.findIndex(([x]) => x === a) === i);
  const json = unique.map(([a, b]): [string, string] => [a.replaceAll('/', '\\/'), b.replaceAll('/', '\\/')]);
  return [...unique, ...json];
}

/**
 * Runs the replacement over the tables of the install's staging database whose names start with
 * `prefix`; answers the rows changed and the uid the script ran as. Issue 28 finding 10: the script
 * unserializes tenant rows, so it runs as the install's own system user (`runuser`), never root, and
 * reaches MariaDB with an account made for the call (`hpr_<hex>`, a random password) that can read
 * and update the staging database only, dropped after; the administrator's password never reaches
 * it. The script file stays root's (0600): root pipes it to the PHP CLI's standard input.
 */
export async function searchReplace(input: {
  mariadb: MariaDb;
  installId: string;
  prefix: string;
  pairs: [string, string][];
  scriptPath: string;
  signal: AbortSignal;
}): Promise<{ rows: number; uid: number | null }> {
  if (input.pairs.length === 0) return { rows: 0, uid: null };
  if (!/^[A-Za-z0-9_]{1,20}$/.test(input.prefix)) throw new Error('bad table prefix');
  const n = databaseNames(input.installId);
  await fs.mkdir(path.dirname(input.scriptPath), { recursive: true });
  await fs.writeFile(input.scriptPath, SCRIPT, { mode: 0o600 });
  await fs.chmod(input.scriptPath, 0o600);
  const out = path.join(path.dirname(input.scriptPath), `.search-replace.${process.pid}.out`);
  const password = randomBytes(24).toString('base64url');
  const { target } = input.mariadb;
  try {
    await input.mariadb.createRewriteAccount(n.rewriter, n.staging, password);
    await run('runuser', ['-u', systemUser(input.installId), '--', PHP_CLI], {
      signal: input.signal,
      stdin: input.scriptPath,
      stdout: out,
      env: {
        ...TOOL_ENV,
        HP_PAIRS: JSON.stringify(input.pairs),
        HP_PREFIX: input.prefix,
        HP_DB_HOST: target.host,
        HP_DB_PORT: String(target.port),
        HP_DB_USER: n.rewriter,
        HP_DB_PASSWORD: password,
        HP_DB_NAME: n.staging,
      },
    });
    const text = await fs.readFile(out, 'utf8');
    const report = JSON.parse(text.trim().split('\n').pop() ?? '{}') as { rows?: number; uid?: number };
    return { rows: Number(report.rows ?? 0), uid: report.uid ?? null };
  } finally {
    await input.mariadb.dropUser(n.rewriter);
    await fs.rm(out, { force: true });
  }
}
