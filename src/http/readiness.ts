import type { DbBudgetConfig } from '../config.js';
import { Errors } from '../errors.js';

/**
 * A readiness check that answers within a budget (issue 20 defect 4): past `timeoutMs` the probe
 * gets a 503, whatever the check is still waiting for, and a check already in flight is shared by
 * the probes that come meanwhile, not stacked (a silent database would otherwise hold one pooled
 * connection per probe). The worker's probe pings through the background pool, whose budget is
 * minutes of jobs' work; the API's pool gives up sooner, but the same bound holds for both.
 */
export function boundedCheck(check: () => Promise<void>, timeoutMs: number): () => Promise<void> {
  let inFlight: Promise<void> | null = null;
  return () => {
    if (!inFlight) {
      inFlight = check().finally(() => {
        inFlight = null;
      });
    }
    const shared = inFlight;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(Errors.unavailable(`The database did not answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      shared.then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  };
}

/** A probe's budget: what one statement of an API request may take, client read timeout included. */
export function probeTimeoutMs(budget: DbBudgetConfig): number {
  return Math.max(budget.acquireTimeoutMs, budget.apiStatementTimeoutMs) + 1000;
}
