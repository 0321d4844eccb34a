import type mysql from 'mysql2/promise';
import { run } from './run.js';

/**
 * The local driver's database side: one MariaDB database and user per install, named from the
 * install id (`hp_<hex>`, checked by {@link ident} before it reaches SQL), dumps by `mariadb-dump
 * --single-transaction` and loads by the `mariadb` client, spawned with argument arrays and the
 * password in the environment, never on a command line.
 */

/** The only names this module puts in SQL as identifiers: `hp_` / `hps_` / `hpt_` + hex, or a table name. */
const NAME = /^hp[st]?_[0-9a-f]{32}$/;
const TABLE = /^[A-Za-z0-9_$]{1,64}$/;

export function ident(name: string): string {
  if (!NAME.test(name)) throw new Error(`not a driver database name: ${JSON.stringify(name)}`);
  return `\`${name}\``;
}

/** A database name as a GRANT matches it: `_` escaped (it is a LIKE wildcard there), quoted. */
export function grantIdent(name: string): string {
  ident(name);
  return `\`${name.replace(/_/g, '\\_')}\``;
}

export function tableIdent(name: string): string {
  if (!TABLE.test(name)) throw new Error(`unsupported table name: ${JSON.stringify(name)}`);
  return `\`${name}\``;
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

    /** A consistent dump of `db` (all tables, or only `tables`) into `file`. */
    dump(db: string, file: string, signal: AbortSignal, tables: string[] | null = null) {
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
          '--triggers',
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

    close: async () => {
      if (opened) await (await opened).end();
    },
  };
}

export type MariaDb = ReturnType<typeof createMariaDb>;
