import { createHash } from 'node:crypto';
import type mysql from 'mysql2/promise';
import { run } from './run.js';

/**
 * The local driver's database side: one MariaDB database and user per install, named from the
 * install id (`hp_<hex>`, checked by {@link ident} before it reaches SQL), dumps by `mariadb-dump
 * --single-transaction` and loads by the `mariadb` client, spawned with argument arrays and the
 * password in the environment, never on a command line.
 */

/**
 * The driver's own names it puts in SQL as identifiers: `hp_` (an install's database and user),
 * `hps_` / `hpt_` (its staging and trash databases), `hpr_` (the copy's rewrite account) + hex.
 */
const NAME = /^hp[rst]?_[0-9a-f]{32}$/;

export function ident(name: string): string {
  if (!NAME.test(name)) throw new Error(`not a driver database name: ${JSON.stringify(name)}`);
  return `\`${name}\``;
}

/** A database name as a GRANT matches it: `_` escaped (it is a LIKE wildcard there), quoted. */
export function grantIdent(name: string): string {
  ident(name);
  return `\`${name.replace(/_/g, '\\_')}\``;
}

/**
 * Issue 28 finding 7: a table (or trigger) name as MariaDB allows it, quoted: 1 to 64 characters, any
 * but NUL and those outside the Basic Multilingual Plane (MariaDB refuses both in identifiers), not
 * ending in a space; a backtick doubled. Names come from the server's own catalogue (a tenant's
 * tables), so a space, a dot, a backtick or unicode is ordinary here.
 */
export function tableIdent(name: string): string {
  const chars = [...name];
  if (
    chars.length < 1 ||
    chars.length > 64 ||
    name.endsWith(' ') ||
    chars.some((c) => c === '\0' || (c.codePointAt(0) ?? 0) > 0xffff)
  )
    throw new Error(`unsupported table name: ${JSON.stringify(name)}`);
  return `\`${name.replaceAll('`', '``')}\``;
}

/** A trigger as information_schema describes it: enough to define it again, in another database. */
export interface Trigger {
  name: string;
  table: string;
  timing: 'BEFORE' | 'AFTER';
  event: 'INSERT' | 'UPDATE' | 'DELETE';
  /** Its order among the triggers of the same table, timing and event (defined again in this order). */
  order: number;
  /** The body, as the server stored it (it parsed it once as a trigger body). */
  statement: string;
  sqlMode: string;
  /** `user@host`. */
  definer: string;
}

/** `user@host` (a definer as information_schema spells it) as SQL: each part quoted. */
function definerIdent(definer: string): string {
  const at = definer.lastIndexOf('@');
  if (at <= 0) throw new Error(`unexpected trigger definer ${JSON.stringify(definer)}`);
  const part = (s: string) => `\`${s.replaceAll('`', '``')}\``;
  return `${part(definer.slice(0, at))}@${part(definer.slice(at + 1))}`;
}

export interface MariaDbTarget {
  host: string;
  port: number;
  user: string;
  password: string;
}

export function parseMariaDbUrl(url: string): MariaDbTarget {
  const u = new URL(url);
  return {
    host: u.hostname || '127.0.0.1',
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password),
  };
}

export function createMariaDb(url: string) {
  const target = parseMariaDbUrl(url);
  // Issue 20: mysql2 (~40 ms and ~6 MB of a start) loads with the first statement, not with the
  // services: only the local driver's work uses it, and a process may run none.
  let opened: Promise<mysql.Pool> | null = null;
  const pool = () => {
    opened ??= import('mysql2/promise').then(({ default: client }) =>
      client.createPool({
        host: target.host,
        port: target.port,
        user: target.user,
        password: target.password,
        connectionLimit: 4,
        multipleStatements: false,
      }),
    );
    return opened;
  };
  const clientEnv = { PATH: '/usr/bin:/bin', MYSQL_PWD: target.password };
  const clientArgs = ['--host', target.host, '--port', String(target.port), '--user', target.user];

  async function exec(sql: string, values: unknown[] = []) {
    await (await pool()).query(sql, values);
  }

  async function tablesOf(db: string): Promise<Record<string, number>> {
    ident(db);
    const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
      `SELECT table_name AS name, COALESCE(data_length, 0) + COALESCE(index_length, 0) AS bytes
         FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'
         ORDER BY table_name`,
      [db],
    );
    return Object.fromEntries(rows.map((r) => [String(r.name), Number(r.bytes)]));
  }

  return {
    target,

    async databaseExists(db: string): Promise<boolean> {
      ident(db);
      const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
        'SELECT 1 FROM information_schema.schemata WHERE schema_name = ?',
        [db],
      );
      return rows.length > 0;
    },

    async userExists(user: string): Promise<boolean> {
      ident(user);
      const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
        'SELECT 1 FROM mysql.user WHERE user = ?',
        [user],
      );
      return rows.length > 0;
    },

    /** The database and its user (password set again on every call, so a retry converges). */
    async createAccount(db: string, user: string, password: string) {
      await exec(
        `CREATE DATABASE IF NOT EXISTS ${ident(db)} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`,
      );
      await exec(`CREATE USER IF NOT EXISTS ${ident(user)}@'%' IDENTIFIED BY ?`, [password]);
      await exec(`ALTER USER ${ident(user)}@'%' IDENTIFIED BY ?`, [password]);
      // Issue 28 finding 10: in a GRANT's database name `_` is a LIKE wildcard (`hp_<hex>` also
      // matched `hp0<hex>`...): escaped, the grant names this database only. A grant made before
      // (unescaped) is revoked, so re-provisioning an existing install fixes it.
      await exec(`GRANT ALL PRIVILEGES ON ${grantIdent(db)}.* TO ${ident(user)}@'%'`);
      await exec(`REVOKE ALL PRIVILEGES ON ${ident(db)}.* FROM ${ident(user)}@'%'`).catch((err: unknown) => {
        // ER_NONEXISTING_GRANT: there was no wildcard grant.
        if ((err as { errno?: number }).errno !== 1141) throw err;
      });
    },

    async dropAccount(db: string, user: string) {
      await exec(`DROP DATABASE IF EXISTS ${ident(db)}`);
      await exec(`DROP USER IF EXISTS ${ident(user)}@'%'`);
    },

    createDatabase: (db: string) => exec(`CREATE DATABASE ${ident(db)} CHARACTER SET utf8mb4`),
    dropDatabase: (db: string) => exec(`DROP DATABASE IF EXISTS ${ident(db)}`),

    /** Bytes per base table (data + indexes, information_schema). */
    tablesOf,

    /** Bytes of the whole database (information_schema), 0 when it does not exist. */
    async databaseBytes(db: string): Promise<number> {
      const tables = await tablesOf(db);
      return Object.values(tables).reduce((a, b) => a + b, 0);
    },

    /**
     * A consistent dump of `db` (all tables, or only `tables`) into `file`, with the tables' triggers
     * unless `triggers` is false (a copy reads them from information_schema: triggersOf).
     */
    dump(db: string, file: string, signal: AbortSignal, tables: string[] | null = null, triggers = true) {
      ident(db);
      const only = tables ?? [];
      for (const table of only) tableIdent(table);
      return run(
        'mariadb-dump',
        [
          ...clientArgs,
          '--single-transaction',
          '--skip-dump-date',
          '--skip-routines',
          triggers ? '--triggers' : '--skip-triggers',
          '--hex-blob',
          '--default-character-set=utf8mb4',
          '--',
          db,
          ...only,
        ],
        { signal, env: clientEnv, stdout: file },
      );
    },

    /** Loads a dump into `db`. */
    load(db: string, file: string, signal: AbortSignal) {
      ident(db);
      return run('mariadb', [...clientArgs, '--default-character-set=utf8mb4', '--database', db], {
        signal,
        env: clientEnv,
        stdin: file,
      });
    },

    /**
     * Issue 30 (decision #235): a fingerprint of each base table of `db`, `rows:definition:triggers`:
     * its rows (CHECKSUM TABLE), its definition (SHOW CREATE TABLE) and its triggers (without their
     * definer, which each server sets), so a table whose rows, columns, indexes or triggers changed
     * has another. Computed by one server at two times, equal fingerprints are equal tables.
     */
    async fingerprints(db: string): Promise<Record<string, string>> {
      const tables = Object.keys(await tablesOf(db));
      if (tables.length === 0) return {};
      const conn = await (await pool()).getConnection();
      try {
        const [sums] = await conn.query<mysql.RowDataPacket[]>(
          `CHECKSUM TABLE ${tables.map((t) => `${ident(db)}.${tableIdent(t)}`).join(', ')}`,
        );
        const rowsOf = new Map(sums.map((r) => [String(r.Table), String(r.Checksum)]));
        const [triggers] = await conn.query<mysql.RowDataPacket[]>(
          `SELECT event_object_table AS tbl, trigger_name AS name, action_timing AS timing,
                  event_manipulation AS event, action_order AS ord, action_statement AS statement,
                  sql_mode AS mode
             FROM information_schema.triggers WHERE trigger_schema = ?
            ORDER BY event_object_table, action_timing, event_manipulation, action_order`,
          [db],
        );
        const out: Record<string, string> = {};
        for (const table of tables) {
          const [created] = await conn.query<mysql.RowDataPacket[]>(
            `SHOW CREATE TABLE ${ident(db)}.${tableIdent(table)}`,
          );
          const definition = createHash('sha256').update(String(created[0]?.['Create Table'] ?? ''));
          const defined = createHash('sha256');
          for (const tr of triggers)
            if (String(tr.tbl) === table)
              defined.update(
                `${[tr.name, tr.timing, tr.event, tr.ord, tr.statement, tr.mode].map(String).join('\0')}\0`,
              );
          out[table] = [
            rowsOf.get(`${db}.${table}`) ?? 'none',
            definition.digest('hex').slice(0, 32),
            defined.digest('hex').slice(0, 32),
          ].join(':');
        }
        return out;
      } finally {
        conn.release();
      }
    },

    /** Whether `db` holds a table (or view) named `table`. */
    async tableExists(db: string, table: string): Promise<boolean> {
      ident(db);
      const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
        'SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?',
        [db, table],
      );
      return rows.length > 0;
    },

    /** The views of `db` (a restore or copy refuses them: decisions.md #137). */
    async viewsOf(db: string): Promise<string[]> {
      ident(db);
      const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
        `SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = ? AND table_type = 'VIEW' ORDER BY table_name`,
        [db],
      );
      return rows.map((r) => String(r.name));
    },

    /** The triggers of `db` (of `tables` only, when given), in the order they were defined. */
    async triggersOf(db: string, tables: string[] | null = null): Promise<Trigger[]> {
      ident(db);
      const [rows] = await (await pool()).query<mysql.RowDataPacket[]>(
        `SELECT trigger_name AS name, event_object_table AS tbl, action_timing AS timing,
                event_manipulation AS event, action_order AS ord, action_statement AS statement,
                sql_mode AS mode, definer
           FROM information_schema.triggers WHERE trigger_schema = ?
          ORDER BY event_object_table, action_timing, event_manipulation, action_order`,
        [db],
      );
      const all = rows.map(
        (r): Trigger => ({
          name: String(r.name),
          table: String(r.tbl),
          timing: String(r.timing) === 'AFTER' ? 'AFTER' : 'BEFORE',
          event: (['INSERT', 'UPDATE', 'DELETE'] as const).find((e) => e === String(r.event)) ?? 'INSERT',
          order: Number(r.ord),
          statement: String(r.statement),
          sqlMode: String(r.mode),
          definer: String(r.definer),
        }),
      );
      return tables === null ? all : all.filter((tr) => tables.includes(tr.table));
    },

    dropTrigger: (db: string, name: string) =>
      exec(`DROP TRIGGER IF EXISTS ${ident(db)}.${tableIdent(name)}`),

    /**
     * Defines `trigger` on its table in `db`, as `definer` (`user@host`; null: its own). On a
     * connection of its own: the trigger's sql_mode and `db` as the default database are set for the
     * statement and never reach the pool; names unqualified, so a dump of `db` (which keeps the
     * statement as written) loads it into whatever database it is loaded into. Its body is the
     * server's own text of a trigger it parsed before, after the same prefix.
     */
    async createTrigger(db: string, trigger: Trigger, definer: string | null = null) {
      const conn = await (await pool()).getConnection();
      try {
        await conn.query('SET SESSION sql_mode = ?', [trigger.sqlMode]);
        await conn.query(`USE ${ident(db)}`);
        await conn.query(
          `CREATE DEFINER=${definerIdent(definer ?? trigger.definer)} TRIGGER ${tableIdent(trigger.name)}
             ${trigger.timing === 'AFTER' ? 'AFTER' : 'BEFORE'} ${trigger.event === 'DELETE' ? 'DELETE' : trigger.event === 'UPDATE' ? 'UPDATE' : 'INSERT'}
             ON ${tableIdent(trigger.table)} FOR EACH ROW ${trigger.statement}`,
        );
      } finally {
        // Its session (sql_mode, default database) is not handed to anyone else.
        conn.destroy();
      }
    },

    /**
     * Issue 28 finding 10: an account (`hpr_<hex>`) that can read and update `db` (a staging database)
     * and nothing else, for the copy's URL rewrite; made afresh with a new password on every call.
     */
    async createRewriteAccount(user: string, db: string, password: string) {
      await exec(`DROP USER IF EXISTS ${ident(user)}@'%'`);
      await exec(`CREATE USER ${ident(user)}@'%' IDENTIFIED BY ?`, [password]);
      await exec(`GRANT SELECT, UPDATE ON ${ident(db)}.* TO ${ident(user)}@'%'`);
    },

    dropUser: (user: string) => exec(`DROP USER IF EXISTS ${ident(user)}@'%'`),

    /**
     * Moves tables in one RENAME TABLE (atomic in MariaDB): each `[from, to]` pair names
     * `db.table` on both sides. The swap of a restore or copy is one statement, so the live
     * database holds either all old tables or all new ones.
     */
    async renameTables(pairs: [db: string, table: string, toDb: string, toTable: string][]) {
      if (pairs.length === 0) return;
      const list = pairs
        .map(([a, t, b, u]) => `${ident(a)}.${tableIdent(t)} TO ${ident(b)}.${tableIdent(u)}`)
        .join(', ');
      await exec(`RENAME TABLE ${list}`);
    },

    /** Issue 30: drops `tables` of `db` (a cross-server copy of some tables: the others, in staging). */
    async dropTables(db: string, tables: string[]) {
      if (tables.length === 0) return;
      await exec(`DROP TABLE IF EXISTS ${tables.map((t) => `${ident(db)}.${tableIdent(t)}`).join(', ')}`);
    },

    close: async () => {
      if (opened) await (await opened).end();
    },
  };
}

export type MariaDb = ReturnType<typeof createMariaDb>;
