/** An account's limits (AccountLimits): null means no limit. */
export interface Limits {
  visitors: number | null;
  storage: number | null;
  bandwidth: number | null;
}

const NO_LIMITS: Limits = { visitors: null, storage: null, bandwidth: null };

/**
 * Limits by plan (accounts.plan), used unless an operator set the account's own limits
 * (`PUT /admin/v1/accounts/{id}/limits`). Visitors a month, storage GB, bandwidth GB a month.
 * An unknown plan, and `enterprise` (negotiated per contract), have no limits until an operator sets them.
 */
export const PLAN_LIMITS: Readonly<Record<string, Limits>> = {
  startup: { visitors: 25_000, storage: 10, bandwidth: 50 },
  standard: { visitors: 25_000, storage: 150, bandwidth: 1_000 },
  growth: { visitors: 100_000, storage: 20, bandwidth: 200 },
  scale: { visitors: 400_000, storage: 50, bandwidth: 500 },
  premium: { visitors: 1_000_000, storage: 500, bandwidth: 4_000 },
  enterprise: NO_LIMITS,
};

export const limitsOfPlan = (plan: string): Limits => PLAN_LIMITS[plan] ?? NO_LIMITS;
