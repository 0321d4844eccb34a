import { escapeHtml, factsMail } from './facts.js';

/** T9/T11: sent to the owners of both accounts when a site transfer completes or fails. */
export interface SiteTransferFinished {
  transfer: {
    id: string;
    site_name: string;
    install_names: string[];
    origin_account_name: string;
    destination_account_name: string;
    scheduled_time: Date | null;
    created_at: Date;
  };
  status: 'completed' | 'failed';
  error: string | null;
  finishedAt: Date;
}

export function siteTransferFinishedMail(m: SiteTransferFinished) {
  const { transfer } = m;
  const from = transfer.origin_account_name;
  const to = transfer.destination_account_name;
  const headline =
    m.status === 'completed'
      ? `Site ${transfer.site_name} was transferred from ${from} to ${to}.`
      : `The transfer of site ${transfer.site_name} from ${from} to ${to} failed; the site stays with ${from}.`;
  const subject = `Site transfer of ${transfer.site_name} ${m.status}`;
  const rows: [string, string][] = [
    ['Transfer', transfer.id],
    ['Site', transfer.site_name],
    ['Installs', transfer.install_names.join(', ') || '-'],
    ['From account', from],
    ['To account', to],
    ['Outcome', m.status],
    ...(m.error ? [['Error', m.error] as [string, string]] : []),
    ['Requested', transfer.created_at.toISOString()],
    ['Scheduled for', transfer.scheduled_time?.toISOString() ?? 'immediately'],
    ['Finished', m.finishedAt.toISOString()],
  ];
  return factsMail(subject, { text: headline, html: escapeHtml(headline) }, rows);
}
