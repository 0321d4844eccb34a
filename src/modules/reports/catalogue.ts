/**
 * The built-in catalogue of report sections and templates (P5, P6). Every account sees the same
 * templates; a template lists the sections it allows, and a schedule may pick only those.
 */

export interface SectionDef {
  name: SectionName;
  display_text: string;
  order: number;
  group_name: string;
  group_display_text: string;
  mandatory: boolean;
  /** One line on what the section shows (preview image and report text). */
  summary: string;
}

export const SECTION_NAMES = [
  'cover',
  'overview',
  'visits',
  'bandwidth',
  'requests',
  'storage',
  'environments',
  'usage',
] as const;
export type SectionName = (typeof SECTION_NAMES)[number];

const group = {
  overview: ['overview', 'Overview'],
  traffic: ['traffic', 'Traffic'],
  resources: ['resources', 'Resources'],
  details: ['details', 'Details'],
} as const;

function section(
  name: SectionName,
  display_text: string,
  [group_name, group_display_text]: readonly [string, string],
  summary: string,
  mandatory = false,
): SectionDef {
  return {
    name,
    display_text,
    order: SECTION_NAMES.indexOf(name) + 1,
    group_name,
    group_display_text,
    mandatory,
    summary,
  };
}

export const SECTIONS: readonly SectionDef[] = [
  section('cover', 'Cover', group.overview, 'The site, the period and who the report is for', true),
  section('overview', 'Summary', group.overview, 'Totals of the eight usage metrics for the period'),
  section('visits', 'Visits', group.traffic, 'Visits and billable visits per day'),
  section('bandwidth', 'Bandwidth', group.traffic, 'Origin and CDN network bytes per day'),
  section('requests', 'Origin requests', group.traffic, 'Requests that reached the origin per day'),
  section('storage', 'Storage', group.resources, 'File and database storage per day and at the end'),
  section('environments', 'Environments', group.resources, 'Each install of the site with its totals'),
  section('usage', 'Daily usage', group.details, 'Every metric of every day of the period'),
];

export const sectionByName = (name: string) => SECTIONS.find((s) => s.name === name);

export interface TemplateDef {
  template_uuid: string;
  template_name: string;
  description: string;
  company_name: string;
  brand_colour: string;
  sections: readonly SectionName[];
  created_at: string;
  updated_at: string;
}

const RELEASED = '2026-11-01T00:00:00.000Z';

export const TEMPLATES: readonly TemplateDef[] = [
  {
    template_uuid: '5c1f0e2a-7b7d-4f3e-9a51-0d7c3f8e2b01',
    template_name: 'Site Report',
    description: 'Traffic, bandwidth, storage and every environment of the site, with daily details',
    company_name: 'Hostplane',
    brand_colour: '#0E7490',
    sections: SECTION_NAMES,
    created_at: RELEASED,
    updated_at: RELEASED,
  },
  {
    template_uuid: '5c1f0e2a-7b7d-4f3e-9a51-0d7c3f8e2b02',
    template_name: 'Traffic Report',
    description: 'Visits, bandwidth and origin requests of the site',
    company_name: 'Hostplane',
    brand_colour: '#7C3AED',
    sections: ['cover', 'overview', 'visits', 'bandwidth', 'requests', 'usage'],
    created_at: RELEASED,
    updated_at: RELEASED,
  },
  {
    template_uuid: '5c1f0e2a-7b7d-4f3e-9a51-0d7c3f8e2b03',
    template_name: 'Storage Report',
    description: 'File and database storage of the site and of each environment',
    company_name: 'Hostplane',
    brand_colour: '#B45309',
    sections: ['cover', 'overview', 'storage', 'environments'],
    created_at: RELEASED,
    updated_at: RELEASED,
  },
];

/** The template of a schedule that names none. */
export const DEFAULT_TEMPLATE = TEMPLATES[0] as TemplateDef;

export const templateByUuid = (uuid: string) => TEMPLATES.find((t) => t.template_uuid === uuid);

/** A small SVG card of a section or template as a data: URI (no external asset to fetch). */
export function previewImage(title: string, lines: string[], colour = '#0E7490'): string {
  const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const text = lines
    .map((line, i) => `<text x="12" y="${52 + i * 16}" font-size="11" fill="#334155">${esc(line)}</text>`)
    .join('');
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="240" height="135" viewBox="0 0 240 135">` +
    `<rect width="240" height="135" rx="8" fill="#F8FAFC" stroke="${colour}"/>` +
    `<rect width="240" height="28" rx="8" fill="${colour}"/>` +
    `<text x="12" y="19" font-size="13" font-family="sans-serif" fill="#fff">${esc(title)}</text>${text}</svg>`;
  return `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
}
