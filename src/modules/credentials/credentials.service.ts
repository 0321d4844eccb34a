import { randomUUID } from 'node:crypto';
import { type Caller, requireAccount, seesInstall } from '../../auth/access.js';
import type { Authenticator } from '../../auth/authenticator.js';
import {
  type CredentialGate,
  hashSecret,
  newSecret,
  parseCidr,
  type Scope,
  usernameOf,
} from '../../auth/credentials.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import type { Page } from '../../db/page.js';
import { withTransaction } from '../../db/transaction.js';
import { Errors } from '../../errors.js';
import * as repo from './credentials.repo.js';

export type { CredentialRow } from './credentials.repo.js';

export interface CreateCredentialInput {
  description?: string;
  scope: Scope;
  install_ids?: string[] | null;
  expires_at?: string | null;
  allowed_cidrs?: string[] | null;
}

const invalid = (field: string, message: string) => Errors.invalidValue('credential', field, message);

/**
 * Issue 22: scoped credentials of an account (auth/credentials.ts says what they grant). Owners
 * manage them (`credentials:manage`, which no scoped credential carries); the secret is answered once.
 */
export function createCredentialsService({
  db,
  clock,
  authenticator,
  gate,
}: {
  db: Db;
  clock: Clock;
  authenticator: Pick<Authenticator, 'membershipsChanged' | 'invalidate'>;
  gate: Pick<CredentialGate, 'flush'>;
}) {
  return {
    async create(caller: Caller, accountId: string, input: CreateCredentialInput) {
      const membership = requireAccount(caller, accountId, 'credentials:manage');
      const now = clock.now();
      let expiresAt: Date | null = null;
      if (input.expires_at) {
        expiresAt = new Date(input.expires_at);
        if (Number.isNaN(expiresAt.getTime())) throw invalid('expires_at', 'expires_at is not a date-time');
        if (expiresAt.getTime() <= now.getTime())
          throw invalid('expires_at', 'expires_at must be in the future');
      }
      const cidrs = input.allowed_cidrs ? [...new Set(input.allowed_cidrs)] : null;
      for (const cidr of cidrs ?? []) {
        if (!parseCidr(cidr))
          throw invalid('allowed_cidrs', `${JSON.stringify(cidr)} is not an IP address or CIDR`);
      }
      if (cidrs && cidrs.length === 0)
        throw invalid('allowed_cidrs', 'allowed_cidrs must list at least one CIDR, or be null');
      const installIds = input.install_ids ? [...new Set(input.install_ids)] : null;
      if (installIds) {
        if (installIds.length === 0)
          throw invalid('install_ids', 'install_ids must list at least one install, or be null');
        const found = await repo.installsOfAccount(db, accountId, installIds);
        // An install the maker does not see is reported like one that does not exist.
        const missing = installIds.filter((id) => !found.includes(id) || !seesInstall(membership, id));
        if (missing.length > 0) {
          throw Errors.accessError(
            'credential',
            'install_ids',
            `Installs not found in account ${accountId}: ${missing.join(', ')}`,
          );
        }
      }
      const id = randomUUID();
      const password = newSecret();
      const row = await repo.insertCredential(db, {
        id,
        account_id: accountId,
        user_id: caller.userId,
        description: input.description ?? '',
        scope: input.scope,
        install_ids: installIds,
        allowed_cidrs: cidrs,
        secret_hash: hashSecret(password),
        expires_at: expiresAt,
        created_at: now,
      });
      return { ...row, username: usernameOf(id), password };
    },

    async list(caller: Caller, accountId: string, page: Page) {
      requireAccount(caller, accountId, 'credentials:manage');
      await gate.flush();
      return repo.listCredentials(db, accountId, page);
    },

    async get(caller: Caller, accountId: string, id: string) {
      requireAccount(caller, accountId, 'credentials:manage');
      await gate.flush();
      const row = await repo.findCredential(db, accountId, id);
      if (!row) throw Errors.notFound();
      return row;
    },

    /** Takes effect on the next request in every process: the membership epoch moves with it. */
    async revoke(caller: Caller, accountId: string, id: string) {
      requireAccount(caller, accountId, 'credentials:manage');
      await withTransaction(db, async (tx) => {
        if (!(await repo.revokeCredential(tx, accountId, id, clock.now()))) throw Errors.notFound();
        await authenticator.membershipsChanged(tx);
      });
      authenticator.invalidate();
    },
  };
}

export type CredentialsService = ReturnType<typeof createCredentialsService>;
export { usernameOf };
