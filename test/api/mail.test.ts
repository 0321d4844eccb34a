import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { JOBS } from '../../src/jobs/catalog.js';
import { factories } from '../support/factories.js';
import { buildTestApp, type Json } from '../support/harness.js';
import { header, mailOf, operationOf, readyWorld, smtpCapture } from '../support/jobs.js';

// A real SMTP server on a local port; the app delivers to it (SMTP_URL).
const smtp = await smtpCapture();
after(() => smtp.close());
const FROM = 'Hostplane Test <robot@hostplane.test>';
const t = await buildTestApp({ env: { SMTP_URL: smtp.url, MAIL_FROM: FROM } });
const f = factories(t);

/** Undoes quoted-printable soft breaks and escapes, so a body can be searched. */
const unQuote = (raw: string) =>
  raw
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

async function backupWithMail(w: Json, emails: string[]) {
  const res = await w.owner.client.post(`/v1/installs/${w.install.id}/backups`, {
    description: 'mail test',
    notification_emails: emails,
  });
  assert.equal(res.status, 202);
  return res;
}

describe('mail delivery through SMTP_URL (C6, B3, R3)', () => {
  it('B3 delivers one message per address with a text and an HTML part naming install, operation, outcome and times', async () => {
    const w = await readyWorld(t, f);
    const emails = ['first@example.test', 'second@example.test'];
    const res = await backupWithMail(w, emails);
    const before = smtp.received.length;
    await t.runJobs();
    const op = await operationOf(w.owner.client, res);
    const delivered = smtp.received.slice(before);
    assert.deepEqual(
      delivered.map((m) => m.to).sort(),
      emails.map((e) => [e]),
    );
    for (const m of delivered) {
      assert.equal(m.from, 'robot@hostplane.test');
      assert.equal(header(m.raw, 'From'), FROM);
      assert.equal(header(m.raw, 'Subject'), `Backup of install ${w.install.name} completed`);
      assert.equal(header(m.raw, 'X-Hostplane-Operation'), op.id);
      assert.match(header(m.raw, 'Message-ID') ?? '', /^<[0-9a-f-]{36}@hostplane>$/);
      assert.match(header(m.raw, 'Content-Type') ?? '', /multipart\/alternative/);
      assert.match(m.raw, /Content-Type: text\/plain/);
      assert.match(m.raw, /Content-Type: text\/html/);
      const body = unQuote(m.raw);
      for (const fact of [
        w.install.name,
        w.install.id,
        op.id,
        op.created_at,
        op.started_at,
        op.completed_at,
        'Outcome:',
      ]) {
        assert.ok(body.includes(fact), `the message names ${fact}`);
      }
    }
    const outbox = await mailOf(t, op.id);
    assert.ok(outbox.every((m) => m.status === 'sent' && m.attempts === 1 && m.sent_at));
  });

  it('C6 B3 R3 a message the server refused once is retried after a back-off and delivered exactly once', async () => {
    const w = await readyWorld(t, f);
    const res = await backupWithMail(w, ['retry@example.test']);
    // Run the backup but not the mail job yet: the mail job is queued in the same transaction.
    const [backupJob] = await t.queue.fetch('create_backup', 1);
    assert.ok(backupJob);
    await t.runner.runJob('create_backup', backupJob);
    smtp.refuseNext(1);
    const before = smtp.received.length;
    const [first] = await t.queue.fetch('mail-deliver', 1);
    assert.ok(first);
    await t.runner.runJob('mail-deliver', first);
    assert.equal(smtp.received.length, before, 'refused: nothing delivered');
    // The retry waits for its back-off: not fetchable yet.
    assert.deepEqual(await t.queue.fetch('mail-deliver', 1), []);
    assert.equal((await t.queue.jobState('mail-deliver', first.id))?.state, 'retry');
    await t.runJobs(); // the harness skips the back-off
    const delivered = smtp.received.slice(before);
    assert.deepEqual(
      delivered.map((m) => m.to),
      [['retry@example.test']],
    );
    const op = await operationOf(w.owner.client, res);
    const [row] = await mailOf(t, op.id);
    assert.equal(row.status, 'sent');
    assert.equal(row.attempts, 2);
    assert.match(row.last_error, /451/);
  });

  it('issue 20 defect 5: at least once: a message the server took but whose reply was lost is delivered again, with the same Message-ID', async () => {
    const w = await readyWorld(t, f);
    const res = await backupWithMail(w, ['window@example.test']);
    const before = smtp.received.length;
    smtp.loseReplyNext(1); // the server keeps the first delivery; the worker sees a failure
    try {
      await t.runJobs(); // the backup, then the mail job: its attempt "fails", the retry delivers again
    } finally {
      smtp.loseReplyNext(0);
    }
    const op = await operationOf(w.owner.client, res);
    const rows = await mailOf(t, op.id);
    assert.equal(rows.length, 1, 'one outbox message');
    const [row] = rows;
    assert.equal(row.status, 'sent');
    assert.equal(row.attempts, 2);
    const delivered = smtp.received.slice(before);
    assert.deepEqual(
      delivered.map((m) => m.to),
      [['window@example.test'], ['window@example.test']],
      'SMTP cannot make this exactly once: delivered twice',
    );
    // The receiver can drop the second: both carry the outbox message's stable Message-ID.
    assert.deepEqual(
      delivered.map((m) => header(m.raw, 'Message-ID')),
      [`<${row.id}@hostplane>`, `<${row.id}@hostplane>`],
    );
  });

  it('C6 B3 R3 a message refused on every attempt ends failed, listed with the last error', async () => {
    const w = await readyWorld(t, f);
    const res = await backupWithMail(w, ['never@example.test']);
    smtp.refuseNext(100);
    try {
      await t.runJobs();
    } finally {
      smtp.refuseNext(0);
    }
    const op = await operationOf(w.owner.client, res);
    assert.equal(op.status, 'completed', 'mail trouble does not change the outcome of the work');
    const [row] = await mailOf(t, op.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.attempts, JOBS['mail-deliver'].retryLimit + 1);
    assert.match(row.last_error, /451/);
  });

  it('GET /admin/v1/mail lists messages newest first with their delivery state', async () => {
    const w = await readyWorld(t, f);
    t.clock.advance(1000);
    await backupWithMail(w, ['a@example.test']);
    await t.runJobs();
    t.clock.advance(1000);
    await backupWithMail(w, ['b@example.test']);
    await t.runJobs();
    const list = await t.admin.get('/admin/v1/mail?limit=2');
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.results.map((m: Json) => m.to),
      ['b@example.test', 'a@example.test'],
    );
    assert.ok(list.body.count >= 2);
  });
});
