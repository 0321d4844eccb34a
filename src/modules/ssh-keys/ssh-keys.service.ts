import type { Caller } from '../../auth/access.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { Errors } from '../../errors.js';
import * as repo from './ssh-keys.repo.js';
import { parseSshPublicKey, SshKeyError } from './ssh-public-key.js';

/** K1: the caller's own SSH keys. Keys belong to a user, not an account, so every role manages its own. */
export function createSshKeysService({ db, clock }: { db: Db; clock: Clock }) {
  return {
    list: (caller: Caller, page: Page) => repo.listKeys(db, caller.userId, page),

    async create(caller: Caller, publicKey: string) {
      // Issue 22: a scoped credential acts on one account, never on its maker's own keys.
      if (caller.credential) throw Errors.forbidden();
      let key: ReturnType<typeof parseSshPublicKey>;
      try {
        key = parseSshPublicKey(publicKey);
      } catch (err) {
        if (err instanceof SshKeyError)
          throw Errors.invalidValue('ssh_key', 'public_key', err.message, err.problem);
        throw err;
      }
      const row = await repo.insertKey(db, {
        user_id: caller.userId,
        key_type: key.type,
        public_key: key.canonical,
        comment: key.comment,
        fingerprint: key.fingerprint,
        created_at: clock.now(),
      });
      if (!row) {
        throw Errors.valueUnavailable(
          'ssh_key',
          'public_key',
          `The key ${key.fingerprint} is already registered`,
          'key_registered',
        );
      }
      return row;
    },

    /** 404 for a key of another user, like an unknown one (G4). */
    async remove(caller: Caller, id: string) {
      if (caller.credential) throw Errors.forbidden();
      if (!(await repo.deleteKey(db, caller.userId, id))) throw Errors.notFound();
    },
  };
}

export type SshKeysService = ReturnType<typeof createSshKeysService>;
export type { SshKeyRow } from './ssh-keys.repo.js';
