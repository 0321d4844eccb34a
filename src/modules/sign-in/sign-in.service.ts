import { randomUUID } from 'node:crypto';
import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { type HostingDriver, installRef } from '../../drivers/driver.js';
import { Errors } from '../../errors.js';
import type { InstallsService } from '../installs/installs.service.js';
import { assertProvisioned } from '../operations/operations.service.js';
import * as repo from './sign-in.repo.js';

/** How long a sign-in link is accepted: made to be followed at once (docs/decisions.md #148). */
export const SIGN_IN_TTL_SECONDS = 120;
/** The longest a member waits for the driver to make a link. */
const DRIVER_DEADLINE_MS = 30_000;
/** WordPress's administrator when provisioning recorded none (the local driver's name for it). */
const DEFAULT_ADMIN = 'admin';

export interface SignInDeps {
  db: Db;
  clock: Clock;
  installs: Pick<InstallsService, 'requireInstall'>;
  driver: Pick<HostingDriver, 'name' | 'signInLink'>;
}

/** The administrator provisioning made (operations.result.wordpress_admin.username), if any. */
function adminOf(result: unknown): string | null {
  const admin = (result as { wordpress_admin?: { username?: unknown } } | null)?.wordpress_admin;
  return typeof admin?.username === 'string' ? admin.username : null;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/**
 * Issue 29 (defect 7): a single-use sign-in link to an install's wp-admin, made by the driver while
 * the member waits (no operation: nothing changes but the link). Every member who sees the install
 * may ask (owners, full and partial users with it: `installs:sign_in`); no scoped credential may
 * (decisions #116, #148: a leaked token must not yield a site's administrator).
 */
export function createSignInService({ db, installs, driver }: SignInDeps) {
  return {
    async create(caller: Caller, installId: string) {
      const install = await installs.requireInstall(caller, installId, 'installs:sign_in');
      assertProvisioned(install);
      const signInLink = driver.signInLink?.bind(driver);
      if (!signInLink)
        throw Errors.conflict(
          `This host (HOSTING_DRIVER=${driver.name}) offers no WordPress sign-in link; use the administrator's password`,
        );
      const username = adminOf(await repo.provisioningResult(db, install.id)) ?? DEFAULT_ADMIN;
      const signal = AbortSignal.timeout(DRIVER_DEADLINE_MS);
      const call = { key: `wordpress_sign_in:${randomUUID()}`, signal };
      for (;;) {
        let result: Awaited<ReturnType<typeof signInLink>>;
        try {
          result = await signInLink(call, {
            install: installRef(install),
            username,
            ttl_seconds: SIGN_IN_TTL_SECONDS,
          });
        } catch (err) {
          if (signal.aborted)
            throw Errors.unavailable('The host did not make the sign-in link in time; retry');
          throw Errors.badUpstream(`The host could not make the sign-in link: ${(err as Error).message}`);
        }
        if (result.done) return { ...result.value, simulated: driver.name === 'simulated' };
        try {
          await sleep(Math.max(50, result.checkAt.getTime() - Date.now()), signal);
        } catch {
          throw Errors.unavailable('The host did not make the sign-in link in time; retry');
        }
      }
    },
  };
}

export type SignInService = ReturnType<typeof createSignInService>;
