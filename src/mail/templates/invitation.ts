import { escapeHtml } from './facts.js';
/** The invitation sent to a new account user (createAccountUser). It holds the one-time link. */
export interface Invitation {
  account: { id: string; name: string };
  invitee: { email: string; first_name: string };
  /** Who added the user (their name and e-mail), if known. */
  inviter: string | null;
  roles: string;
  /** Absolute URL of POST /v1/invitations/{token}/accept. */
  acceptUrl: string;
  expiresAt: Date;
  /** The user already has a credential: accepting adds no new one. */
  existingUser: boolean;
}

export function invitationMail(m: Invitation) {
  const subject = `You have been added to ${m.account.name} on Hostplane`;
  const by = m.inviter ? ` by ${m.inviter}` : '';
  const outcome = m.existingUser
    ? 'Accepting confirms the invitation; you keep using your existing API credential.'
    : 'Accepting answers your API credential (username and password) once: keep it safe.';
  const lines = [
    `Hello ${m.invitee.first_name},`,
    '',
    `You have been added to the account ${m.account.name} (${m.account.id})${by}, with the roles "${m.roles}".`,
    '',
    'To accept, send a POST request to this single-use link before it expires:',
    '',
    `  ${m.acceptUrl}`,
    '',
    `  curl -X POST '${m.acceptUrl}'`,
    '',
    `The link expires at ${m.expiresAt.toISOString()}. ${outcome}`,
    '',
    '-- Hostplane',
    '',
  ];
  const html = [
    '<!doctype html><html><body>',
    `<p>Hello ${escapeHtml(m.invitee.first_name)},</p>`,
    `<p>You have been added to the account <strong>${escapeHtml(m.account.name)}</strong> (${escapeHtml(m.account.id)})${escapeHtml(by)}, with the roles "${escapeHtml(m.roles)}".</p>`,
    '<p>To accept, send a POST request to this single-use link before it expires:</p>',
    `<pre>curl -X POST '${escapeHtml(m.acceptUrl)}'</pre>`,
    `<p>The link expires at ${m.expiresAt.toISOString()}. ${escapeHtml(outcome)}</p>`,
    '<p>-- Hostplane</p>',
    '</body></html>',
  ].join('\n');
  return { subject, text: lines.join('\n'), html };
}
