import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/client.js';
import { isSealed, type Resealer, resealEach, type SecretBox } from '../../secrets.js';
import * as repo from './idempotency.repo.js';

/** What a replay sends back: the stored status, headers (an allow-list) and body. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string | null;
}

/** The answer to a claim of an Idempotency-Key (http/idempotency.ts acts on it). */
export type Claim =
  | { kind: 'claimed'; token: string }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'mismatch' }
  | { kind: 'in_use'; retryAfterSeconds: number };

export interface IdempotencyDeps {
  db: Db;
  clock: Clock;
  /** Seals the stored bodies (issue 28 finding 5: answers carry once-only passwords and secrets). */
  secretBox: SecretBox;
  /** IDEMPOTENCY_TTL_HOURS: how long a key and its response are kept. */
  ttlHours: number;
  /** A claim left `running` this long is taken to be a crashed process's and may be taken over. */
  lockTimeoutMs?: number;
  /** How long a request waits for a claim of the same key held by this process before a 409. */
  waitMs?: number;
  /** Expired keys are swept at most this often (by the service clock), on a fresh claim. */
  sweepEveryMs?: number;
  /** Most keys one sweep deletes. */
  sweepBatch?: number;
}

export const LOCK_TIMEOUT_MS = 60_000;

/**
 * What a stored body is sealed for: its row (scope and key), so a body moved to another row does not
 * open (docs/decisions.md #140).
 */
const bodyContext = (scope: string, key: string) => `idempotency:${scope}:${key}`;

/**
 * Issue 22: Idempotency-Key (the semantics Stripe documents), per caller scope. A request claims its
 * key with an INSERT ... ON CONFLICT DO NOTHING that commits before the route runs, so of any number of
 * concurrent requests in any number of processes exactly one runs; the others find the claim and
 * either wait for it (when it is held in this process, up to `waitMs`) and replay its response, or
 * answer 409. The claimer stores its response (or releases the key on a 5xx) when it ends. A claim
 * older than the lock timeout was left by a crashed process and is taken over (docs/decisions.md).
 */
export function createIdempotencyService({
  db,
  clock,
  secretBox,
  ttlHours,
  lockTimeoutMs = LOCK_TIMEOUT_MS,
  waitMs = 2000,
  sweepEveryMs = 60_000,
  sweepBatch = 500,
}: IdempotencyDeps) {
  const ttlMs = ttlHours * 3_600_000;
  /** Claims held by this process, so a concurrent request here can wait for the answer. */
  const held = new Map<string, { done: Promise<void>; resolve: () => void }>();
  let lastSweep = Number.NEGATIVE_INFINITY;
  const localKey = (scope: string, key: string) => `${scope}\n${key}`;

  function hold(scope: string, key: string) {
    let resolve = () => {};
    const done = new Promise<void>((r) => {
      resolve = r;
    });
    held.set(localKey(scope, key), { done, resolve });
  }

  function letGo(scope: string, key: string) {
    const entry = held.get(localKey(scope, key));
    held.delete(localKey(scope, key));
    entry?.resolve();
  }

  async function sweepIfDue(now: Date) {
    if (now.getTime() - lastSweep < sweepEveryMs) return;
    lastSweep = now.getTime();
    // Housekeeping only: a failed sweep must not fail the request that claimed (the next one retries).
    await repo.deleteExpired(db, now, sweepBatch).catch(() => 0);
  }

  /**
   * Issue 28 finding 5: every stored body is sealed, whatever the route (no list of secret-bearing
   * routes to forget one from); a body stored in clear before the change (a row younger than the
   * TTL) is answered as it is.
   */
  function openBody(scope: string, key: string, body: string | null): string | null {
    if (body === null || !isSealed(body)) return body;
    return secretBox.open(body, bodyContext(scope, key)).toString('utf8');
  }

  async function tryClaim(scope: string, key: string, fingerprint: string): Promise<Claim | null> {
    const now = clock.now();
    const values = {
      scope,
      key,
      fingerprint,
      token: randomUUID(),
      now,
      expiresAt: new Date(now.getTime() + ttlMs),
    };
    if (await repo.insertClaim(db, values)) {
      await sweepIfDue(now);
      return { kind: 'claimed', token: values.token };
    }
    const staleBefore = new Date(now.getTime() - lockTimeoutMs);
    if (await repo.reclaim(db, { ...values, staleBefore })) return { kind: 'claimed', token: values.token };
    const row = await repo.findKey(db, scope, key);
    // Swept or released between the statements: try again.
    if (!row) return null;
    if (row.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (row.status === 'done' && row.response_status !== null) {
      return {
        kind: 'replay',
        response: {
          status: row.response_status,
          headers: row.response_headers ?? {},
          body: openBody(scope, key, row.response_body),
        },
      };
    }
    const lockedFor = row.locked_at ? now.getTime() - row.locked_at.getTime() : 0;
    return {
      kind: 'in_use',
      retryAfterSeconds: Math.max(1, Math.min(Math.ceil((lockTimeoutMs - lockedFor) / 1000), 5)),
    };
  }

  return {
    /**
     * Claims `key` for this request (`claimed`: run it, then `store` or `release`), or says what to
     * answer instead: the stored response, a mismatch (another request used the key), or in use.
     */
    async claim(scope: string, key: string, fingerprint: string): Promise<Claim> {
      for (let attempt = 0; attempt < 3; attempt++) {
        const claim = await tryClaim(scope, key, fingerprint);
        if (!claim) continue;
        if (claim.kind === 'claimed') hold(scope, key);
        if (claim.kind !== 'in_use') return claim;
        const local = held.get(localKey(scope, key));
        if (!local || attempt > 0) return claim;
        // The running request is this process's: wait for it a little, then look again.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          local.done,
          new Promise<void>((r) => {
            timer = setTimeout(r, waitMs);
          }),
        ]).finally(() => clearTimeout(timer));
      }
      return { kind: 'in_use', retryAfterSeconds: 1 };
    },

    /** Keeps the response of a claimed request for replays (a no-op when the claim was taken over). */
    async store(scope: string, key: string, token: string, response: StoredResponse): Promise<void> {
      try {
        const body =
          response.body === null
            ? null
            : secretBox.seal(Buffer.from(response.body, 'utf8'), bodyContext(scope, key));
        await repo.storeResponse(db, scope, key, token, { ...response, body });
      } finally {
        letGo(scope, key);
      }
    },

    /** Gives the key up (the request failed with a 5xx): a retry with it runs. */
    async release(scope: string, key: string, token: string): Promise<void> {
      try {
        await repo.releaseClaim(db, scope, key, token);
      } finally {
        letGo(scope, key);
      }
    },

    /** Deletes up to `sweepBatch` expired keys now; answers how many. */
    sweep: () => repo.deleteExpired(db, clock.now(), sweepBatch),
  };
}

/**
 * `hostplane reseal`: the stored bodies sealed again under the new key; a body still in clear (kept
 * before bodies were sealed) is sealed with `sealNew` (the new key's box) and counted as resealed.
 */
export async function resealIdempotentResponses(tx: Db, reseal: Resealer, sealNew: SecretBox['seal']) {
  const rows = await repo.storedBodies(tx);
  const count = { resealed: 0, current: 0 };
  for (const row of rows.filter((r) => !isSealed(r.body))) {
    await repo.setBody(
      tx,
      row.scope,
      row.key,
      sealNew(Buffer.from(row.body, 'utf8'), bodyContext(row.scope, row.key)),
    );
    count.resealed++;
  }
  return resealEach(
    rows.filter((r) => isSealed(r.body)),
    reseal,
    (row) => ({ sealed: row.body, context: bodyContext(row.scope, row.key) }),
    (row, next) => repo.setBody(tx, row.scope, row.key, next),
    count,
  );
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
