import { randomBytes } from 'node:crypto';
import type { Db } from '../../db/client.js';
import { type Resealer, resealEach } from '../../secrets.js';
import type { CallContext, HostingDriver, InstallRef } from '../driver.js';
import { forgetInstall } from './acme.js';
import type { LocalContext } from './context.js';
import * as files from './files.js';
import * as repo from './local.repo.js';
import { secureLayout } from './modes.js';
import { databaseNames, pathsOf } from './names.js';

/**
 * An install's life on this machine: provisioning makes its directories (a placeholder page in the
 * document root) and its MariaDB database and user, whose password is kept sealed (local_installs);
 * deprovisioning removes all of it, its backups and its recorded tasks.
 */

/** What an install's database password is sealed for. */
const passwordContext = (installId: string) => `local-install:${installId}`;
/** What an install's WordPress administrator password is sealed for (issue 21). */
const adminContext = (installId: string) => `local-wp-admin:${installId}`;

/** Issue 21: the WordPress administrator's password while the driver keeps it (null: forgotten, or never made). */
async function adminPasswordOf({ db, secretBox }: Pick<LocalContext, 'db' | 'secretBox'>, installId: string) {
  const sealed = (await repo.findInstall(db, installId))?.admin_password_sealed;
  return sealed ? secretBox.open(sealed, adminContext(installId)).toString('utf8') : null;
}

/** The install's database account, its password opened (null: not provisioned by this driver). */
export async function accountOf(
  { db, secretBox }: Pick<LocalContext, 'db' | 'secretBox'>,
  installId: string,
) {
  const row = await repo.findInstall(db, installId);
  if (!row) return null;
  const password = secretBox.open(row.password_sealed, passwordContext(installId)).toString('utf8');
  return { db_name: row.db_name, db_user: row.db_user, password };
}

/**
 * Issue 30 (decision #240): each provisioned install's database and its user, as the reconcile finds
 * them: a user gone is made again (the password the driver keeps, its grant on the database only); a
 * database gone is reported, not made (its rows are in its backups: a restore brings them back).
 */
export async function reconcileDatabases(
  ctx: Pick<LocalContext, 'db' | 'secretBox' | 'mariadb'>,
  installIds: string[],
) {
  const repaired: string[] = [];
  const drift: string[] = [];
  for (const id of installIds) {
    // Not provisioned here yet (or being provisioned): nothing is expected of it.
    if ((await repo.countCompleted(ctx.db, id, 'provision')) === 0) continue;
    const account = await accountOf(ctx, id);
    if (!account) continue;
    if (!(await ctx.mariadb.databaseExists(account.db_name))) {
      drift.push(`install ${id}: its database is missing (restore a backup)`);
      continue;
    }
    if (!(await ctx.mariadb.userExists(account.db_user))) {
      await ctx.mariadb.createAccount(account.db_name, account.db_user, account.password);
      repaired.push(`install ${id}: its database user was missing: made again`);
    }
  }
  return { repaired, drift };
}

export function installOperations(
  ctx: LocalContext,
): Pick<HostingDriver, 'provision' | 'deprovision' | 'forgetAdminPassword'> {
  const { db, mariadb, hostingRoot, once } = ctx;

  /** The recorded part of provisioning (local_tasks): everything but the administrator's password. */
  const provisionOnce = (call: CallContext, install: InstallRef) =>
    once('provision', call, [install.id], async () => {
      const paths = pathsOf(hostingRoot, install.id);
      const n = databaseNames(install.id);
      const password = Buffer.from(randomBytes(24).toString('base64url'));
      // Issue 21: the owner's WordPress administrator (with the web tier): 24 base64url characters.
      const adminPassword = ctx.web ? Buffer.from(randomBytes(18).toString('base64url')) : null;
      // A first attempt's passwords are kept: the row is inserted once, then read back.
      await repo.insertInstall(db, {
        install_id: install.id,
        db_name: n.db,
        db_user: n.user,
        password_sealed: ctx.secretBox.seal(password, passwordContext(install.id)),
        admin_password_sealed: adminPassword && ctx.secretBox.seal(adminPassword, adminContext(install.id)),
      });
      const acc = await accountOf(ctx, install.id);
      if (!acc) throw new Error('the install account vanished');
      await mariadb.createAccount(n.db, n.user, acc.password);
      // Issue 28: HOSTING_ROOT's own directories with their modes before an install's are made in it.
      await secureLayout(hostingRoot, ctx.web !== null);
      await files.createInstallDirs(paths);
      // Issue 21: WordPress installed and served (its PHP's version is the one that serves it).
      const served = ctx.web
        ? await ctx.web.provision(install, acc, await adminPasswordOf(ctx, install.id), call.signal)
        : null;
      return {
        wp_version: await files.readWpVersion(paths.public, call.signal),
        php_version: served ? served.php_version : await files.readPhpVersion(paths.private),
        ...(served && { wordpress_admin: served.admin }),
      };
    });

  return {
    /**
     * The administrator's password is added to the recorded answer while the driver keeps it (sealed,
     * local_installs), so a repeated call answers the same one until the caller has stored it.
     */
    provision: async (call: CallContext, install: InstallRef) => {
      const result = await provisionOnce(call, install);
      if (!result.done) return result;
      const { wordpress_admin: admin, ...versions } = result.value;
      if (!admin) return { done: true, value: versions };
      const password = await adminPasswordOf(ctx, install.id);
      return { done: true, value: { ...versions, wordpress_admin: { ...admin, password } } };
    },

    forgetAdminPassword: (installId: string) => repo.clearAdminPassword(db, installId),

    deprovision: (call: CallContext, install: InstallRef) =>
      once('deprovision', call, [install.id], async () => {
        const n = databaseNames(install.id);
        const paths = pathsOf(hostingRoot, install.id);
        // Issue 21: no longer served (server block, pool, system user) before its files go.
        await ctx.web?.deprovision(install.id, call.signal);
        await mariadb.dropAccount(n.db, n.user);
        await mariadb.dropDatabase(n.staging);
        await mariadb.dropDatabase(n.trash);
        // Issue 28: the tenant's trees are emptied as their owner (tenant.ts `removeTree`).
        await files.remove(paths.root, call.signal);
        await files.remove(`${paths.public}.old`, call.signal);
        await files.remove(paths.backups, call.signal);
        await forgetInstall(db, install.id);
        await repo.deleteTasksOf(db, install.id);
        await repo.deleteInstall(db, install.id);
        return {} as Record<string, never>;
      }),
  };
}

/**
 * `hostplane reseal` (key rotation): the local driver's sealed values are the installs' database
 * passwords and the WordPress administrator passwords not handed on yet. Runs in the caller's transaction, whichever driver is configured (the table is empty
 * when the local driver was never used).
 */
export async function resealLocalSecrets(tx: Db, reseal: Resealer) {
  const count = await resealEach(
    await repo.sealedPasswords(tx),
    reseal,
    (row) => ({ sealed: row.sealed, context: passwordContext(row.install_id) }),
    (row, next) => repo.setPassword(tx, row.install_id, next),
  );
  return resealEach(
    await repo.sealedAdminPasswords(tx),
    reseal,
    (row) => (row.sealed === null ? null : { sealed: row.sealed, context: adminContext(row.install_id) }),
    (row, next) => repo.setAdminPassword(tx, row.install_id, next),
    count,
  );
}
