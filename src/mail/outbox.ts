import type { Clock } from '../clock.js';
import type { Db } from '../db/client.js';
import type { Page } from '../db/page.js';
import type { JobQueue } from '../jobs/queue.js';
import type { Mailer } from './mailer.js';
import * as repo from './outbox.repo.js';

export interface NewMessage {
  operation_id: string | null;
  /** What happened, e.g. `create_backup.completed`; one message per operation, event and address. */
  event: string;
  to: string;
  subject: string;
  text: string;
  html: string;
  /** It holds a one-time secret (an invitation link): the bodies are erased once it is delivered. */
  sensitive?: boolean;
}

export interface OutboxDeps {
  db: Db;
  queue: Pick<JobQueue, 'enqueue'>;
  mailer: Mailer;
  clock: Clock;
}

/**
 * The outbox: messages are written in the transaction that completes the work, each with its own
 * `mail-deliver` job (so delivery retries per message). Without SMTP_URL they are kept, not sent.
 */
export function createOutbox({ db, queue, mailer, clock }: OutboxDeps) {
  return {
    /** In the caller's transaction: the messages and their delivery jobs commit with the work. */
    async add(tx: Db, messages: NewMessage[]) {
      const ids = await repo.insertMessages(
        tx,
        messages.map((m) => ({
          operation_id: m.operation_id,
          event: m.event,
          to_address: m.to,
          subject: m.subject,
          text_body: m.text,
          html_body: m.html,
          sensitive: m.sensitive ?? false,
          created_at: clock.now(),
        })),
      );
      for (const id of ids) await queue.enqueue(tx, 'mail-deliver', { message_id: id });
      return ids;
    },

    /** The mail-deliver job. A send that fails throws, and the job is retried with back-off. */
    async deliver(messageId: string) {
      const message = await repo.findMessage(db, messageId);
      if (message?.status !== 'pending') return;
      if (!mailer.delivers) {
        await repo.settle(db, messageId, { status: 'kept' });
        return;
      }
      await repo.recordAttempt(db, messageId);
      try {
        await mailer.send({
          messageId: `<${message.id}@hostplane>`,
          to: message.to_address,
          subject: message.subject,
          text: message.text_body,
          html: message.html_body,
          headers: {
            'X-Hostplane-Event': message.event,
            ...(message.operation_id && { 'X-Hostplane-Operation': message.operation_id }),
          },
        });
      } catch (err) {
        await repo.recordError(db, messageId, (err as Error).message);
        throw err;
      }
      await repo.settle(db, messageId, { status: 'sent', sent_at: clock.now() });
      await repo.eraseIfSensitive(db, messageId);
    },

    /** Retries exhausted: the message stays listed, as failed with its last error. */
    async giveUp(messageId: string, error: string) {
      await repo.settle(db, messageId, { status: 'failed', last_error: error });
      await repo.eraseIfSensitive(db, messageId);
    },

    list: (page: Page) => repo.listMessages(db, page),
  };
}

export type Outbox = ReturnType<typeof createOutbox>;
export type { MailRow } from './outbox.repo.js';
