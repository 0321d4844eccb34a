import { escapeHtml, factsMail } from './facts.js';

/** Issue 22: an endpoint whose deliveries failed for 3 days was disabled (to the account's owners). */
export function webhookDisabledMail(m: {
  endpoint: { id: string; url: string; description: string };
  failingSince: Date;
  lastError: string;
}) {
  const headline = `Webhook endpoint ${m.endpoint.url} was disabled: its deliveries have failed since ${m.failingSince.toISOString()}.`;
  return factsMail('Webhook endpoint disabled', { text: headline, html: escapeHtml(headline) }, [
    ['Endpoint', m.endpoint.id],
    ['URL', m.endpoint.url],
    ['Description', m.endpoint.description || '-'],
    ['Failing since', m.failingSince.toISOString()],
    ['Last error', m.lastError],
    ['To resume', 'PATCH the endpoint with {"enabled": true}'],
  ]);
}
