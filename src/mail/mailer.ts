import type { Transporter } from 'nodemailer';

/** One outgoing message as the outbox hands it to a transport. */
export interface OutgoingMail {
  /** Stable per outbox row, so a receiver can drop a duplicate delivery (delivery is at least once). */
  messageId: string;
  to: string;
  subject: string;
  text: string;
  html: string;
  headers: Record<string, string>;
}

/** Where mail goes: an SMTP server (SMTP_URL), or nowhere (the outbox keeps it: GET /admin/v1/mail). */
export interface Mailer {
  /** False when mail is only kept in the outbox. */
  readonly delivers: boolean;
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

/** SMTP through nodemailer; `url` is SMTP_URL (`smtp://` or `smtps://`, credentials in the URL). */
export function createSmtpMailer(url: string, from: string): Mailer {
  // nodemailer loads with the first message, not at every start (issue 14).
  let transport: Promise<Transporter> | null = null;
  const open = () => {
    transport ??= import('nodemailer').then((m) => m.default.createTransport(url, { from }));
    return transport;
  };
  return {
    delivers: true,
    async send(mail) {
      await (await open()).sendMail({
        messageId: mail.messageId,
        to: mail.to,
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
        headers: mail.headers,
      });
    },
    close: () => {
      void transport?.then((t) => t.close());
    },
  };
}

/** No SMTP_URL: messages stay in the outbox with status `kept`. */
export const keepingMailer: Mailer = {
  delivers: false,
  async send() {
    throw new Error('no SMTP_URL configured');
  },
  close() {},
};

export function createMailer(config: { smtpUrl: string | null; mailFrom: string }): Mailer {
  return config.smtpUrl ? createSmtpMailer(config.smtpUrl, config.mailFrom) : keepingMailer;
}
