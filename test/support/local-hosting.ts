import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import mysql from 'mysql2/promise';

/** The MariaDB server of these machines (scripts/test.sh starts it); TEST_MARIADB_URL overrides it. */
export const MARIADB_URL = process.env.TEST_MARIADB_URL ?? 'mysql://root@127.0.0.1:3306';

/** What the local driver adds to the interface (drivers/local/), for assertions. */
export interface LocalDriverProbe {
  countCompleted(installId: string, operation: string): Promise<number>;
  accountOf(installId: string): Promise<{ db_name: string; db_user: string; password: string } | null>;
}

export const slug = (installId: string) => `hp_${installId.replace(/-/g, '')}`;

/**
 * A HOSTING_ROOT of the test file's own under the temp dir (or under `parent`: sshd chroots only
 * below directories root owns and nobody else may write, which /tmp is not: issue 31), and an admin
 * connection to MariaDB. Removed after the file: the directory, and every database and user of the
 * installs it saw.
 */
export async function localHosting({ autoCleanup = true, parent = os.tmpdir() } = {}) {
  const root = await fs.mkdtemp(path.join(parent, 'hostplane-local-'));
  const admin = await mysql.createConnection(MARIADB_URL);
  const seen = new Set<string>();
  const cleanup = async () => {
    for (const id of seen) {
      const s = slug(id);
      for (const db of [s, s.replace('hp_', 'hps_'), s.replace('hp_', 'hpt_')])
        await admin.query(`DROP DATABASE IF EXISTS \`${db}\``);
      await admin.query(`DROP USER IF EXISTS \`${s}\`@'%'`);
    }
    await admin.end();
    await fs.rm(root, { recursive: true, force: true });
  };
  if (autoCleanup) after(cleanup);
  const paths = (installId: string) => {
    seen.add(installId);
    const dir = path.join(root, 'installs', slug(installId));
    return {
      dir,
      public: path.join(dir, 'public'),
      private: path.join(dir, 'private'),
      cache: path.join(dir, 'cache'),
      backups: path.join(root, 'backups', slug(installId)),
    };
  };
  return {
    root,
    admin,
    cleanup,
    paths,
    env: { HOSTING_DRIVER: 'local', HOSTING_ROOT: root, MARIADB_URL },
    /** A connection as the install's own MariaDB user (proves the account works). */
    async asInstall(driver: LocalDriverProbe, installId: string) {
      const account = await driver.accountOf(installId);
      if (!account) throw new Error(`no local account for ${installId}`);
      const url = new URL(MARIADB_URL);
      return mysql.createConnection({
        host: url.hostname,
        port: Number(url.port || 3306),
        user: account.db_user,
        password: account.password,
        database: account.db_name,
      });
    },
    async databaseExists(installId: string) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        'SELECT 1 FROM information_schema.schemata WHERE schema_name = ?',
        [slug(installId)],
      );
      return rows.length > 0;
    },
    async userExists(installId: string) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT 1 FROM mysql.user WHERE user = ?', [
        slug(installId),
      ]);
      return rows.length > 0;
    },
    async databaseBytes(installId: string) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT COALESCE(SUM(data_length + index_length), 0) AS bytes FROM information_schema.tables
          WHERE table_schema = ? AND table_type = 'BASE TABLE'`,
        [slug(installId)],
      );
      return Number(rows[0]?.bytes ?? 0);
    },
    async tables(installId: string) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`,
        [slug(installId)],
      );
      return rows.map((r) => String(r.name));
    },
    async rows(installId: string, table: string) {
      const [rows] = await admin.query<mysql.RowDataPacket[]>(
        `SELECT * FROM \`${slug(installId)}\`.\`${table}\` ORDER BY 1`,
      );
      return rows.map((r) => ({ ...r }));
    },
  };
}

/** Every file under `dir` (relative path -> sha256), for exact comparisons. */
export async function checksums(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(rel: string) {
    for (const entry of await fs.readdir(path.join(dir, rel), { withFileTypes: true })) {
      const p = path.join(rel, entry.name);
      if (entry.isDirectory()) await walk(p);
      else
        out[p] = createHash('sha256')
          .update(await fs.readFile(path.join(dir, p)))
          .digest('hex');
    }
  }
  await walk('');
  return out;
}

/** `du -sb DIR`: apparent bytes, as the driver reports them. */
export const duBytes = (dir: string) =>
  Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);

/** A site's files: a WordPress version file and some content. */
export async function writeSite(publicDir: string, wpVersion: string, marker: string) {
  await fs.mkdir(path.join(publicDir, 'wp-includes'), { recursive: true });
  await fs.mkdir(path.join(publicDir, 'wp-content', 'uploads'), { recursive: true });
  await fs.writeFile(
    path.join(publicDir, 'wp-includes', 'version.php'),
    `<?php\n$wp_version = '${wpVersion}';\n`,
  );
  await fs.writeFile(path.join(publicDir, 'index.php'), `<?php // ${marker}\n`);
  await fs.writeFile(
    path.join(publicDir, 'wp-content', 'uploads', 'photo.bin'),
    Buffer.alloc(70_000, marker),
  );
}
