import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AgentAsk, agentSshAuthority, SSH_DECISION_CACHE_MS } from './agent-ssh.js';

class Status extends Error {
  constructor(readonly status: number) {
    super(`status ${status}`);
  }
}

/** An authority over a scripted control plane and a hand-moved clock. */
function authorityWith(answer: (route: string, body: Record<string, unknown>) => Record<string, unknown>) {
  let now = 1_000_000;
  const asked: { route: string; body: Record<string, unknown> }[] = [];
  const ask: AgentAsk = async (route, body) => {
    asked.push({ route, body: body as Record<string, unknown> });
    return answer(route, body as Record<string, unknown>);
  };
  const authority = agentSshAuthority({
    ask,
    installNames: async () => new Map(),
    statusOf: (err) => (err instanceof Status ? err.status : null),
    now: () => now,
  });
  return { authority, asked, advance: (ms: number) => (now += ms) };
}

const INSTALL = '0b6a3a4e-6a8e-4c43-9d3a-4f1f6bb0c2d1';

describe('issue 31 with several servers: the agent asks the control plane for SSH (decision 200)', () => {
  it('answers what the control plane says, kept 2 s at most: a revocation is heard once the answer is older', async () => {
    let allowed = true;
    const cp = authorityWith(() => ({
      allowed,
      install_id: INSTALL,
      install_name: 'blog',
      full_access: true,
    }));
    const first = await cp.authority.decide('blog', 'SHA256:abc', 'ssh-ed25519 AAAA');
    assert.deepEqual(first, {
      allowed: true,
      installId: INSTALL,
      installName: 'blog',
      accountId: null,
      userId: null,
      fullAccess: true,
    });
    assert.deepEqual(cp.asked[0], {
      route: '/agent/v1/ssh/decide',
      body: { login: 'blog', fingerprint: 'SHA256:abc', public_key: 'ssh-ed25519 AAAA' },
    });
    allowed = false;
    cp.advance(SSH_DECISION_CACHE_MS - 1);
    assert.equal((await cp.authority.decide('blog', 'SHA256:abc', 'ssh-ed25519 AAAA')).allowed, true);
    assert.equal(cp.asked.length, 1, 'the second lookup of a login within 2 s is not asked again');
    cp.advance(1);
    assert.equal((await cp.authority.decide('blog', 'SHA256:abc', 'ssh-ed25519 AAAA')).allowed, false);
    assert.equal(cp.asked.length, 2);
  });

  it('a 403 (an install not placed on this server) is a refusal; no answer is an error (the lookup fails closed), never cached', async () => {
    let failure: Error = new Status(403);
    const cp = authorityWith(() => {
      throw failure;
    });
    const refused = await cp.authority.decide('other', 'SHA256:abc');
    assert.equal(refused.allowed, false);
    assert.equal(refused.installId, null);
    failure = new Error('connect ETIMEDOUT');
    await assert.rejects(cp.authority.decide('blog', 'SHA256:abc'), /ETIMEDOUT/);
    await assert.rejects(cp.authority.decide('blog', 'SHA256:abc'), /ETIMEDOUT/);
    failure = new Status(503);
    await assert.rejects(cp.authority.decide('blog', 'SHA256:abc'), /503/);
  });

  it('logins are reported in batches, kept while the control plane cannot be reached, and a batch it refuses (400) is dropped', async () => {
    let down = true;
    let refuse = false;
    const cp = authorityWith(() => {
      if (down) throw new Error('unreachable');
      if (refuse) throw new Status(400);
      return { recorded: 1 };
    });
    const login = (n: number) => ({
      kind: 'refused' as const,
      login: `user${n}`,
      address: '10.0.0.1',
      fingerprint: null,
    });
    await cp.authority.record(login(1));
    await cp.authority.record(login(2));
    assert.equal(cp.asked.length, 1, 'no second try within 5 s of a failure');
    down = false;
    cp.advance(5000);
    await cp.authority.record(login(3));
    const sentLogins = () =>
      ((cp.asked.at(-1)?.body.logins ?? []) as { login: string }[]).map((l) => l.login);
    assert.deepEqual(sentLogins(), ['user1', 'user2', 'user3']);
    refuse = true;
    await cp.authority.record(login(4));
    refuse = false;
    await cp.authority.record(login(5));
    assert.deepEqual(sentLogins(), ['user5'], 'the refused batch was dropped, the next sent');
  });
});
