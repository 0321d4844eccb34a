import {
  type Decision,
  NO_DECISION,
  type SshAuthority,
  type SshLogin,
} from '../modules/ssh-access/ssh-access.service.js';

/**
 * Issue 31 with several servers (decision 200): a hosting server's sshd asks the control plane through
 * its agent, with the agent's own credential (`POST /agent/v1/ssh/decide`, answered only for the
 * installs placed on this server). An answer is kept SSH_DECISION_CACHE_MS at most (sshd asks twice
 * per login: once for the key offered, once for its signature); no answer is an error, and an error
 * refuses the login (the key lookup answers nothing): a silent control plane opens nothing.
 */
export const SSH_DECISION_CACHE_MS = 2000;
/** A key lookup waits this long for the control plane (sshd's curl gives up at 5 s). */
export const SSH_ASK_TIMEOUT_MS = 3000;
/** Logins not reported yet (the control plane unreachable) are kept up to this many. */
const MAX_PENDING_LOGINS = 1000;

/** The agent's request to its control plane (agent.ts): its JSON answer, or an error (AgentHttpError). */
export type AgentAsk = (route: string, body: unknown, timeoutMs: number) => Promise<Record<string, unknown>>;

export function agentSshAuthority({
  ask,
  installNames,
  statusOf,
  now = Date.now,
}: {
  ask: AgentAsk;
  /** The names of this server's installs (the agent's own database). */
  installNames: (ids: string[]) => Promise<Map<string, string>>;
  /** The control plane's error status of a failed request (null: no answer): 403 is a refusal, kept. */
  statusOf: (err: unknown) => number | null;
  now?: () => number;
}): SshAuthority {
  const cache = new Map<string, { decision: Decision; until: number }>();
  const pending: SshLogin[] = [];
  let retryAt = 0;

  async function decide(login: string, fingerprint: string | null, publicKey?: string): Promise<Decision> {
    const key = JSON.stringify([login, fingerprint, publicKey ?? null]);
    const hit = cache.get(key);
    if (hit && hit.until > now()) return hit.decision;
    let decision: Decision;
    try {
      const answer = await ask(
        '/agent/v1/ssh/decide',
        {
          login,
          ...(fingerprint && { fingerprint }),
          ...(publicKey !== undefined && { public_key: publicKey }),
        },
        SSH_ASK_TIMEOUT_MS,
      );
      decision = {
        ...NO_DECISION,
        allowed: answer.allowed === true,
        installId: typeof answer.install_id === 'string' ? answer.install_id : null,
        installName: typeof answer.install_name === 'string' ? answer.install_name : null,
        fullAccess: answer.full_access === true,
      };
    } catch (err) {
      if (statusOf(err) !== 403) throw err;
      decision = NO_DECISION;
    }
    if (cache.size >= 1000) for (const [k, v] of cache) if (v.until <= now()) cache.delete(k);
    if (cache.size < 1000) cache.set(key, { decision, until: now() + SSH_DECISION_CACHE_MS });
    return decision;
  }

  return {
    decide,
    installNames,
    /**
     * Reported in batches; kept (bounded) while the control plane cannot be reached, and sent with the
     * next login after a pause (a failed report never stops the gateway's round).
     */
    async record(event: SshLogin) {
      pending.push(event);
      if (pending.length > MAX_PENDING_LOGINS) pending.splice(0, pending.length - MAX_PENDING_LOGINS);
      if (now() < retryAt) return;
      while (pending.length > 0) {
        const batch = pending.slice(0, 200);
        try {
          await ask(
            '/agent/v1/ssh/logins',
            {
              logins: batch.map((e) => ({
                result: e.kind,
                login: e.login.slice(0, 64),
                address: e.address.slice(0, 64),
                fingerprint: e.fingerprint,
              })),
            },
            SSH_ASK_TIMEOUT_MS,
          );
        } catch (err) {
          // A batch the control plane refuses as such (400, 413) is dropped: it would block the rest.
          const status = statusOf(err);
          if (status !== 400 && status !== 413) {
            retryAt = now() + 5000;
            return;
          }
        }
        pending.splice(0, batch.length);
      }
    },
  };
}
