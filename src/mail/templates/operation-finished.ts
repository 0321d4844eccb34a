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

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

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
  const width = Math.max(...rows.map(([label]) => label.length)) + 1;
  const text = [
    `${m.title} of install ${m.install.name} ${outcome}.`,
    '',
    ...rows.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`),
    '',
    '-- Hostplane',
    '',
  ].join('\n');
  const html = [
    '<!doctype html><html><body>',
    `<p>${escapeHtml(m.title)} of install <strong>${escapeHtml(m.install.name)}</strong> ${outcome}.</p>`,
    '<table>',
    ...rows.map(
      ([label, value]) => `<tr><th align="left">${escapeHtml(label)}</th><td>${escapeHtml(value)}</td></tr>`,
    ),
    '</table>',
    '<p>-- Hostplane</p>',
    '</body></html>',
  ].join('\n');
  return { subject, text, html };
}
