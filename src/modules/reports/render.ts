import { type SectionName, sectionByName, type TemplateDef } from './catalogue.js';
import type { MetricValues } from './reports.repo.js';

/** Everything a report shows; metrics are exact decimal strings (bigint), null where unknown. */
export interface ReportInput {
  title: string;
  site: { id: string; name: string };
  template: TemplateDef;
  sections: readonly SectionName[];
  /** The period [start, end) and the whole UTC days it covers. */
  period: { start: Date; end: Date; firstDate: string; lastDate: string };
  recipients: readonly { name: string | null; email: string }[];
  generatedAt: Date;
  /** One entry per day of the period, in order (days without data have null metrics). */
  days: (MetricValues & { date: string })[];
  installs: (MetricValues & { name: string; environment: string | null })[];
  /** Absolute URL of the document, when PUBLIC_URL is known. */
  downloadUrl: string | null;
}

export type Metric = keyof MetricValues;
type Kind = 'count' | 'bytes';
const FLOWS: [Metric, string, Kind][] = [
  ['visit_count', 'Visits', 'count'],
  ['billable_visits', 'Billable visits', 'count'],
  ['network_origin_bytes', 'Origin bandwidth', 'bytes'],
  ['network_cdn_bytes', 'CDN bandwidth', 'bytes'],
  ['network_total_bytes', 'Total bandwidth', 'bytes'],
  ['request_origin_count', 'Origin requests', 'count'],
];
const LEVELS: [Metric, string, Kind][] = [
  ['storage_file_bytes', 'File storage', 'bytes'],
  ['storage_database_bytes', 'Database storage', 'bytes'],
];
export const METRICS = [...FLOWS, ...LEVELS];

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** 1234567 -> "1,234,567", exactly (bigint). */
export const grouped = (value: string) => BigInt(value).toLocaleString('en-US');

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
/** A byte count for people: "1.50 GiB" (the exact figure is shown beside it). */
export function humanBytes(value: string): string {
  let n = BigInt(value);
  let unit = 0;
  let rest = 0n;
  while (n >= 1024n && unit < UNITS.length - 1) {
    rest = n % 1024n;
    n /= 1024n;
    unit++;
  }
  if (unit === 0) return `${n} bytes`;
  const fraction = Number((rest * 100n) / 1024n);
  return `${n}.${String(fraction).padStart(2, '0')} ${UNITS[unit]}`;
}

const show = (value: string | null, kind: Kind) =>
  value === null
    ? 'no data'
    : kind === 'bytes'
      ? `${humanBytes(value)} (${grouped(value)} bytes)`
      : grouped(value);

/** Sum of the known values (null when none is known). */
function total(values: (string | null)[]): string | null {
  const known = values.filter((v): v is string => v !== null);
  return known.length === 0 ? null : known.reduce((a, b) => a + BigInt(b), 0n).toString();
}

/** The period's figure of a metric: flows are summed, storage levels are the last known day. */
export function periodValue(input: Pick<ReportInput, 'days'>, metric: Metric): string | null {
  if (LEVELS.some(([m]) => m === metric)) {
    for (let i = input.days.length - 1; i >= 0; i--) {
      const v = input.days[i]?.[metric];
      if (v !== null && v !== undefined) return v;
    }
    return null;
  }
  return total(input.days.map((d) => d[metric]));
}

interface Series {
  label: string;
  colour: string;
  values: (string | null)[];
}

/**
 * A bar chart as inline SVG (no script, no external asset): one group of bars per day, the
 * series side by side, a labelled y axis and first/last dates. Readable in print (solid fills).
 */
export function barChart(title: string, dates: string[], series: Series[], kind: Kind): string {
  const width = 720;
  const height = 240;
  const left = 84;
  const bottom = 36;
  const top = 16;
  const plotW = width - left - 12;
  const plotH = height - top - bottom;
  const numbers = series.map((s) => s.values.map((v) => (v === null ? null : Number(v))));
  const highest = Math.max(0, ...numbers.flat().map((v) => v ?? 0));
  const max = Math.max(1, highest);
  const slot = plotW / Math.max(1, dates.length);
  const barW = Math.max(1, (slot * 0.8) / series.length);
  const bars: string[] = [];
  numbers.forEach((values, si) => {
    values.forEach((v, di) => {
      if (v === null) return;
      const h = Math.max(v > 0 ? 1 : 0, (v / max) * plotH);
      const x = left + di * slot + slot * 0.1 + si * barW;
      const y = top + plotH - h;
      const label = `${dates[di]}: ${series[si]?.label} ${show(series[si]?.values[di] ?? null, kind)}`;
      bars.push(
        `<rect class="bar" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${series[si]?.colour}"><title>${esc(label)}</title></rect>`,
      );
    });
  });
  const maxLabel =
    kind === 'bytes' ? humanBytes(String(Math.round(max))) : Math.round(max).toLocaleString('en-US');
  const legend = series
    .map(
      (s, i) =>
        `<rect x="${left + i * 180}" y="${height - 14}" width="10" height="10" fill="${s.colour}"/>` +
        `<text x="${left + i * 180 + 14}" y="${height - 5}" font-size="11">${esc(s.label)}</text>`,
    )
    .join('');
  return [
    `<svg class="chart" role="img" aria-label="${esc(title)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">`,
    `<title>${esc(title)}</title>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${top + plotH}" stroke="#475569"/>`,
    `<line x1="${left}" y1="${top + plotH}" x2="${left + plotW}" y2="${top + plotH}" stroke="#475569"/>`,
    `<text x="${left - 6}" y="${top + 10}" font-size="11" text-anchor="end">${esc(maxLabel)}</text>`,
    `<text x="${left - 6}" y="${top + plotH}" font-size="11" text-anchor="end">0</text>`,
    `<text x="${left}" y="${top + plotH + 14}" font-size="11">${esc(dates[0] ?? '')}</text>`,
    `<text x="${left + plotW}" y="${top + plotH + 14}" font-size="11" text-anchor="end">${esc(dates.at(-1) ?? '')}</text>`,
    ...bars,
    legend,
    '</svg>',
  ].join('');
}

const COLOURS = { a: '#0E7490', b: '#F59E0B', c: '#7C3AED' };

function metricTable(rows: [string, string][]): string {
  return `<table class="figures">${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</table>`;
}

function chartOf(input: ReportInput, title: string, kind: Kind, metrics: [Metric, string][]): string {
  const dates = input.days.map((d) => d.date);
  const colours = [COLOURS.a, COLOURS.b, COLOURS.c];
  return barChart(
    title,
    dates,
    metrics.map(([m, label], i) => ({
      label,
      colour: colours[i] ?? COLOURS.a,
      values: input.days.map((d) => d[m]),
    })),
    kind,
  );
}

/** Each section: its HTML and its plain-text lines. */
function sectionParts(name: SectionName, input: ReportInput): { html: string; text: string[] } {
  const value = (m: Metric, kind: Kind) => show(periodValue(input, m), kind);
  const rows = (list: [Metric, string, Kind][]) =>
    list.map(([m, label, kind]): [string, string] => [label, value(m, kind)]);
  switch (name) {
    case 'cover': {
      const facts: [string, string][] = [
        ['Site', `${input.site.name} (${input.site.id})`],
        ['Period', `${input.period.firstDate} to ${input.period.lastDate}`],
        ['Generated', input.generatedAt.toISOString()],
        ['Recipients', input.recipients.map((r) => (r.name ? `${r.name} <${r.email}>` : r.email)).join(', ')],
      ];
      return {
        html: `<p class="lead">${esc(input.template.template_name)} for ${esc(input.site.name)}</p>${metricTable(facts)}`,
        text: facts.map(([k, v]) => `${k}: ${v}`),
      };
    }
    case 'overview':
      return { html: metricTable(rows(METRICS)), text: rows(METRICS).map(([k, v]) => `${k}: ${v}`) };
    case 'visits': {
      const list = FLOWS.slice(0, 2);
      return {
        html:
          chartOf(
            input,
            'Visits per day',
            'count',
            list.map(([m, l]) => [m, l]),
          ) + metricTable(rows(list)),
        text: rows(list).map(([k, v]) => `${k}: ${v}`),
      };
    }
    case 'bandwidth': {
      const list = FLOWS.slice(2, 5);
      return {
        html:
          chartOf(
            input,
            'Bandwidth per day',
            'bytes',
            list.map(([m, l]) => [m, l]),
          ) + metricTable(rows(list)),
        text: rows(list).map(([k, v]) => `${k}: ${v}`),
      };
    }
    case 'requests': {
      const list = FLOWS.slice(5);
      return {
        html:
          chartOf(
            input,
            'Origin requests per day',
            'count',
            list.map(([m, l]) => [m, l]),
          ) + metricTable(rows(list)),
        text: rows(list).map(([k, v]) => `${k}: ${v}`),
      };
    }
    case 'storage':
      return {
        html:
          chartOf(
            input,
            'Storage per day',
            'bytes',
            LEVELS.map(([m, l]) => [m, l]),
          ) + metricTable(rows(LEVELS)),
        text: rows(LEVELS).map(([k, v]) => `${k} (end of period): ${v}`),
      };
    case 'environments':
      return environments(input);
    case 'usage':
      return daily(input);
  }
}

function environments(input: ReportInput) {
  const cols: [Metric, string, Kind][] = [FLOWS[0], FLOWS[4], LEVELS[0], LEVELS[1]].filter(
    (c): c is [Metric, string, Kind] => c !== undefined,
  );
  const head = `<tr><th>Install</th><th>Environment</th>${cols.map(([, l]) => `<th>${esc(l)}</th>`).join('')}</tr>`;
  const body = input.installs
    .map(
      (i) =>
        `<tr><td>${esc(i.name)}</td><td>${esc(i.environment ?? '-')}</td>${cols
          .map(
            ([m, , kind]) =>
              `<td>${esc(i[m] === null ? 'no data' : kind === 'bytes' ? humanBytes(i[m]) : grouped(i[m]))}</td>`,
          )
          .join('')}</tr>`,
    )
    .join('');
  const text = input.installs.map(
    (i) =>
      `${i.name} (${i.environment ?? '-'}): ${cols.map(([m, l, kind]) => `${l} ${i[m] === null ? 'no data' : kind === 'bytes' ? humanBytes(i[m]) : grouped(i[m])}`).join(', ')}`,
  );
  return { html: `<table class="grid">${head}${body}</table>`, text: text.length ? text : ['No installs.'] };
}

function daily(input: ReportInput) {
  const head = `<tr><th>Date</th>${METRICS.map(([, l]) => `<th>${esc(l)}</th>`).join('')}</tr>`;
  const cell = (v: string | null) => (v === null ? '-' : grouped(v));
  const body = input.days
    .map((d) => `<tr><td>${d.date}</td>${METRICS.map(([m]) => `<td>${cell(d[m])}</td>`).join('')}</tr>`)
    .join('');
  const text = input.days.map(
    (d) => `${d.date}: ${METRICS.map(([m, l]) => `${l} ${cell(d[m])}`).join('; ')}`,
  );
  return {
    html: `<p class="note">Byte counts in bytes; "-" marks a day without data.</p><table class="grid small">${head}${body}</table>`,
    text,
  };
}

const STYLE = `
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:#0f172a;background:#fff;margin:0}
main{max-width:760px;margin:0 auto;padding:24px}
header{border-bottom:4px solid var(--brand);padding-bottom:12px;margin-bottom:16px}
h1{margin:0 0 4px;font-size:26px}h2{font-size:18px;color:var(--brand);border-bottom:1px solid #cbd5e1;padding-bottom:4px}
.lead{font-size:16px}.note{font-size:12px;color:#475569}
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:4px 8px;text-align:left;vertical-align:top}
.figures th{color:#334155;font-weight:600}.grid th,.grid td{border:1px solid #cbd5e1}.small{font-size:11px}
svg.chart{display:block;max-width:100%;height:auto;font-family:inherit;margin:8px 0}
section{break-inside:avoid;page-break-inside:avoid;margin-bottom:24px}
footer{font-size:12px;color:#475569;border-top:1px solid #cbd5e1;padding-top:8px}
@media print{main{max-width:none;padding:0}*{-webkit-print-color-adjust:exact;print-color-adjust:exact}a{color:inherit}}
`;

/** The report: a self-contained HTML document (inline CSS and SVG) and its plain-text twin. */
export function renderReport(input: ReportInput): { subject: string; html: string; text: string } {
  const { site, period, template } = input;
  const subject = `${input.title}: ${site.name}, ${period.firstDate} to ${period.lastDate}`;
  const ordered = [...input.sections].sort(
    (a, b) => (sectionByName(a)?.order ?? 0) - (sectionByName(b)?.order ?? 0),
  );
  const parts = ordered.map((name) => ({
    name,
    title: sectionByName(name)?.display_text ?? name,
    ...sectionParts(name, input),
  }));
  const link = input.downloadUrl
    ? `<p><a href="${esc(input.downloadUrl)}">${esc(input.downloadUrl)}</a></p>`
    : '';
  const html = [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${esc(subject)}</title><style>:root{--brand:${esc(template.brand_colour)}}${STYLE}</style></head><body><main>`,
    `<header><h1>${esc(input.title)}</h1><div>${esc(site.name)} &middot; ${period.firstDate} to ${period.lastDate}</div></header>`,
    ...parts.map(
      (p) => `<section id="${p.name}" data-section="${p.name}"><h2>${esc(p.title)}</h2>${p.html}</section>`,
    ),
    `<footer>${esc(template.company_name)} &middot; ${esc(template.template_name)} &middot; generated ${input.generatedAt.toISOString()}${link}</footer>`,
    '</main></body></html>',
  ].join('\n');
  const text = [
    input.title,
    `${site.name}, ${period.firstDate} to ${period.lastDate}`,
    '',
    ...parts.flatMap((p) => [p.title.toUpperCase(), ...p.text, '']),
    ...(input.downloadUrl ? [`The report: ${input.downloadUrl}`, ''] : []),
    `-- ${template.company_name}`,
    '',
  ].join('\n');
  return { subject, html, text };
}
