const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);
// SQLSTATE: admin/crash shutdown, cannot connect now, too many connections.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Cannot use a pool after calling end',
  'connection is closed',
  'Query read timeout',
  'Client was closed and is not queryable',
];

function* causes(err: unknown): Generator<Record<string, unknown>> {
  let current = err;
  for (let depth = 0; depth < 5 && current && typeof current === 'object'; depth++) {
    yield current as Record<string, unknown>;
    current = (current as { cause?: unknown }).cause;
  }
}

/** G11: true when the error means the database cannot be reached (answer 503), not a bad query. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const e of causes(err)) {
    const code = typeof e.code === 'string' ? e.code : '';
    if (CONNECTION_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08')) return true;
    const message = typeof e.message === 'string' ? e.message : '';
    if (CONNECTION_MESSAGES.some((m) => message.includes(m))) return true;
  }
  return false;
}

/** The SQLSTATE of a database error (wrapped by Drizzle or not), e.g. `23505` for a unique violation. */
export function sqlState(err: unknown): { code: string; constraint: string | undefined } | null {
  for (const e of causes(err)) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) {
      return { code: e.code, constraint: typeof e.constraint === 'string' ? e.constraint : undefined };
    }
  }
  return null;
}

// SQLSTATE class 40: the transaction lost a race (deadlock detected, serialization failure). Nothing
// was written; the same request, sent again, normally succeeds.
const CONFLICT_SQLSTATES = new Set(['40P01', '40001']);

// 57014: the statement was cancelled (its statement_timeout passed: a lock held elsewhere, or a
// database too slow for the request's budget); 55P03: a lock was not available in time.
const TOO_SLOW_SQLSTATES = new Set(['57014', '55P03']);

/** True when a statement ran out of its time budget: nothing was written, the request may be retried. */
export function isStatementTimeout(err: unknown): boolean {
  const state = sqlState(err);
  return state !== null && TOO_SLOW_SQLSTATES.has(state.code);
}

/**
 * Set on the error of a statement that commits on receipt (a COMMIT, a write outside a transaction)
 * when its answer was lost (a read timeout, a reset): the database may have committed it, or not.
 * db/client.ts marks it (decision 246).
 */
export const COMMIT_OUTCOME_UNKNOWN = 'commitOutcomeUnknown';

/** True when a transaction's COMMIT was sent and its answer lost: the change may have been made. */
export function isCommitOutcomeUnknown(err: unknown): boolean {
  for (const e of causes(err)) if (e[COMMIT_OUTCOME_UNKNOWN] === true) return true;
  return false;
}

/** True when the database rolled the transaction back because of a concurrent one (retry it). */
export function isTransactionConflict(err: unknown): boolean {
  const state = sqlState(err);
  return state !== null && CONFLICT_SQLSTATES.has(state.code);
}
