import { isDatabaseUnavailable } from '../db/errors.js';

/** The subset of pino's logger background loops use. */
export interface OutageLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface OutageOptions {
  /** The first retry waits this long; each failure in a row doubles it. */
  baseMs?: number;
  /** The longest wait between two tries, so work resumes soon after the database returns. */
  maxMs?: number;
}

/**
 * What every background loop of a process (fetch loops, sweeper, heartbeat, LISTEN) does with a
 * database error: it never throws out of the loop. The first failure of an outage is logged once
 * (warn), later ones only at debug level; the first success after it logs the recovery with the
 * outage's length. `failed()` answers how long the loop waits before it tries again (exponential,
 * with jitter, capped), so a refusing database is not hammered and a returning one is noticed soon.
 */
export function createOutage(log: OutageLog, { baseMs = 500, maxMs = 5000 }: OutageOptions = {}) {
  let since: number | null = null;
  let failures = 0;
  return {
    /** True while the database is thought unreachable (since the first failure, until a success). */
    get down() {
      return since !== null;
    },

    /** Records a failed try of `source`; answers the delay (ms) before the next try. */
    failed(source: string, err: unknown): number {
      const unavailable = isDatabaseUnavailable(err);
      if (!unavailable) {
        // A bad query, a bug: logged every time, but the loop still carries on.
        log.warn({ err, source }, 'background work failed; it is retried');
      } else if (since === null) {
        since = Date.now();
        log.warn(
          { err, source },
          'database unavailable: background work backs off and resumes when it answers',
        );
      }
      failures = Math.min(failures + 1, 16);
      const ceiling = Math.min(maxMs, baseMs * 2 ** (failures - 1));
      return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
    },

    /** Records a successful try: ends the outage (logged once) and resets the back-off. */
    ok(source: string) {
      failures = 0;
      if (since === null) return;
      log.info({ source, downMs: Date.now() - since }, 'database available again: background work resumed');
      since = null;
    },
  };
}

export type Outage = ReturnType<typeof createOutage>;
