/** HTML-escapes text for the mail bodies. */
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * A notification mail: a headline, then labelled facts (aligned columns in the text part, a table in
 * the HTML part). `headline.html` is already escaped HTML.
 */
export function factsMail(
  subject: string,
  headline: { text: string; html: string },
  rows: readonly (readonly [label: string, value: string])[],
) {
  const width = Math.max(...rows.map(([label]) => label.length)) + 1;
  const text = [
    headline.text,
    '',
    ...rows.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`),
    '',
    '-- Hostplane',
    '',
  ].join('\n');
  const html = [
    '<!doctype html><html><body>',
    `<p>${headline.html}</p>`,
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
