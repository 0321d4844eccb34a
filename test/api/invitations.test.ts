import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { queryRows } from '../../src/db/client.js';
import { factories } from '../support/factories.js';
import { basic, buildTestApp, clientFor, type Json } from '../support/harness.js';
import { type CapturedMail, header, mailOf, smtpCapture } from '../support/jobs.js';
import { expectBadCredentials, expectNotFound, idsOf } from '../support/security.js';

// A real SMTP server on a local port; invitations go out through the outbox and its delivery job.
const smtp = await smtpCapture();
after(() => smtp.close());
const t = await buildTestApp({
  env: {
    SMTP_URL: smtp.url,
    MAIL_FROM: 'Hostplane <robot@hostplane.test>',
    PUBLIC_URL: 'https://hp.example.test',
  },
});
const f = factories(t);

const DAY = 24 * 3600 * 1000;

/** Undoes quoted-printable soft breaks and escapes, so a body can be searched. */
const unQuote = (raw: string) =>
  raw
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

const LINK = /https:\/\/hp\.example\.test\/v1\/invitations\/([A-Za-z0-9_-]{43})\/accept/;

/** Adds `email` to the world's account as the owner, runs the mail job, answers the delivered mail. */
async function invite(
  w: Json,
  email: string,
  roles = 'full',
): Promise<{ user: Json; mail: CapturedMail; token: string }> {
  const before = smtp.received.length;
  const res = await w.owner.client.post(`/v1/accounts/${w.account.id}/account_users`, {
    user: { account_id: w.account.id, first_name: 'Grace', last_name: 'Hopper', email, roles },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await t.runJobs();
  const delivered = smtp.received.slice(before);
  assert.equal(delivered.length, 1, 'one invitation mail');
  const mail = delivered[0] as CapturedMail;
  const token = LINK.exec(unQuote(mail.raw))?.[1];
  assert.ok(token, 'the mail holds the accept link');
  return { user: res.body.account_user, mail, token };
}

const accept = (token: string) => t.anonymous.post(`/v1/invitations/${token}/accept`);
const newEmail = () => `invitee-${randomBytes(4).toString('hex')}@example.test`;

describe('invitation e-mail', () => {
  it('U4 a new account user gets an invitation through SMTP with a single-use link on PUBLIC_URL, valid 7 days', async () => {
    const w = await f.world();
    const email = newEmail();
    const { user, mail } = await invite(w, email);
    assert.deepEqual(mail.to, [email]);
    assert.equal(mail.from, 'robot@hostplane.test');
    assert.equal(header(mail.raw, 'Subject'), `You have been added to ${w.account.name} on Hostplane`);
    assert.equal(header(mail.raw, 'X-Hostplane-Event'), 'account_user.invited');
    const body = unQuote(mail.raw);
    assert.ok(body.includes(w.account.id));
    assert.ok(body.includes('"full"'));
    assert.ok(body.includes(new Date(t.clock.now().getTime() + 7 * DAY).toISOString()), 'names the expiry');
    assert.ok(body.includes(w.owner.email), 'names who invited');
    assert.equal(user.invite_accepted, false);
  });

  it('only a hash of the token is stored, and the delivered message no longer holds the link', async () => {
    const w = await f.world();
    const email = newEmail();
    const { token } = await invite(w, email);
    const rows = await queryRows<{ token_hash: string }>(
      t.database.db,
      sql`select token_hash from invitations where token_hash = ${createHash('sha256').update(token).digest('hex')}`,
    );
    assert.equal(rows.length, 1);
    const leaked = await queryRows(t.database.db, sql`select 1 from invitations where token_hash = ${token}`);
    assert.equal(leaked.length, 0);
    const [sent] = (await mailOf(t)).filter((m) => m.to === email);
    assert.equal(sent.status, 'sent');
    assert.ok(!sent.text.includes(token) && !sent.html.includes(token), 'erased after delivery');
    assert.match(sent.text, /erased after delivery/);
  });
});

describe('acceptInvitation', () => {
  it('U4 accepting sets invite_accepted and answers a working Basic credential once', async () => {
    const w = await f.world();
    const { user, token } = await invite(w, newEmail());
    const res = await accept(token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.account_id, w.account.id);
    assert.equal(res.body.user_id, user.user_id);
    const { username, password } = res.body.credential;
    assert.ok(username && password);
    const client = clientFor(t.app, basic(username, password));
    assert.deepEqual(idsOf(await client.get('/v1/accounts')), [w.account.id]);
    assert.equal((await client.get('/v1/user')).body.email, user.email);
    const record = await w.owner.client.get(`/v1/accounts/${w.account.id}/account_users/${user.user_id}`);
    assert.equal(record.body.invite_accepted, true);
  });

  it('single use: a second acceptance is 400 invitation_used and issues nothing', async () => {
    const w = await f.world();
    const { token } = await invite(w, newEmail());
    assert.equal((await accept(token)).status, 200);
    const again = await accept(token);
    assert.equal(again.status, 400);
    assert.equal(again.body.errors[0].code, 'invitation_used');
    assert.ok(!JSON.stringify(again.body).includes('password'));
  });

  it('concurrent acceptances of one link: exactly one credential', async () => {
    const w = await f.world();
    const { token } = await invite(w, newEmail());
    const results = await Promise.all([accept(token), accept(token), accept(token)]);
    assert.deepEqual(
      results.map((r) => r.status).sort(),
      [200, 400, 400],
      JSON.stringify(results.map((r) => r.body)),
    );
  });

  it('expiry: the link works until 7 days have passed (manual clock), then 400 invitation_expired', async () => {
    const w = await f.world();
    const late = await invite(w, newEmail());
    const onTime = await invite(w, newEmail());
    t.clock.advance(7 * DAY - 1000);
    assert.equal((await accept(onTime.token)).status, 200);
    t.clock.advance(1000);
    const res = await accept(late.token);
    assert.equal(res.status, 400);
    assert.equal(res.body.errors[0].code, 'invitation_expired');
    const record = await w.owner.client.get(
      `/v1/accounts/${w.account.id}/account_users/${late.user.user_id}`,
    );
    assert.equal(record.body.invite_accepted, false);
  });

  it('a user who already has a credential joins without a new one', async () => {
    const w = await f.world();
    const existing = await f.user([]);
    const { token } = await invite(w, existing.email, 'partial');
    const res = await accept(token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.user_id, existing.userId);
    assert.equal(res.body.credential, null);
    assert.deepEqual(idsOf(await existing.client.get('/v1/accounts')), [w.account.id]);
  });

  it('a removed member’s invitation no longer works; unknown and malformed tokens are 404 and 400, never 401', async () => {
    const w = await f.world();
    const { user, token } = await invite(w, newEmail());
    assert.equal(
      (await w.owner.client.delete(`/v1/accounts/${w.account.id}/account_users/${user.user_id}`)).status,
      204,
    );
    expectNotFound(await accept(token));
    expectNotFound(await accept(randomBytes(32).toString('base64url')));
    const malformed = await accept('short');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.errors[0].field, 'token');
  });

  it('G2 the accept route takes no credentials and ignores any sent', async () => {
    const w = await f.world();
    const { token } = await invite(w, newEmail());
    const res = await clientFor(t.app, basic('nobody', 'wrong')).post(`/v1/invitations/${token}/accept`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    // The account-user routes themselves still need credentials.
    expectBadCredentials(await t.anonymous.get(`/v1/accounts/${w.account.id}/account_users`));
  });
});
