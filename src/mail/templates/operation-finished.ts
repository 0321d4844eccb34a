import { escapeHtml, factsMail } from './facts.js';

/** C6, B3, R3: the notification sent to each address when a copy, backup or restore ends. */
export interface OperationFinished {
  operation: {
    id: string;
    type: string;
    status: 'completed' | 'failed';
    error: string | null;
    created_at: Date;
    started_at: Date | null;
    completed_at: Date;
  };
  install: { id: string; name: string };
  /** What the work was, for the subject: "Backup", "Restore", "Copy". */
  title: string;
  /** Extra facts, one per line: the backup's description and version, the copy's source... */
  details: [label: string, value: string][];
}

const iso = (d: Date | null) => (d ? d.toISOString() : '-');

export function operationFinishedMail(m: OperationFinished) {
  const outcome = m.operation.status === 'completed' ? 'completed' : 'failed';
  const subject = `${m.title} of install ${m.install.name} ${outcome}`;
  const rows: [string, string][] = [
    ['Install', `${m.install.name} (${m.install.id})`],
    ['Operation', `${m.operation.type} ${m.operation.id}`],
    ['Outcome', outcome],
    ...(m.operation.error ? [['Error', m.operation.error] as [string, string]] : []),
    ['Requested', iso(m.operation.created_at)],
    ['Started', iso(m.operation.started_at)],
    ['Finished', iso(m.operation.completed_at)],
    ...m.details,
  ];
  return factsMail(
    subject,
    {
      text: `${m.title} of install ${m.install.name} ${outcome}.`,
      html: `${escapeHtml(m.title)} of install <strong>${escapeHtml(m.install.name)}</strong> ${outcome}.`,
    },
    rows,
  );
}
