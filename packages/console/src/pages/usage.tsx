import type { paths } from '@hostplane/client';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useSubmit } from '../api.js';
import { href } from '../router.js';
import { Alert, DataTable, formatBytes, Loading, Select } from '../ui.js';

// This module (and uPlot with it) is loaded only when the usage page is opened (main.tsx).

type AccountUsage =
  paths['/v1/accounts/{account_id}/usage']['get']['responses'][200]['content']['application/json'];
type Environment = AccountUsage['environment_metrics'][number];
type Metric = Exclude<keyof Environment['metrics'][number], 'date'>;

/** The eight metrics of the usage API, with how to show their values. */
export const METRICS: { key: Metric; label: string; bytes: boolean }[] = [
  { key: 'visit_count', label: 'Visits', bytes: false },
  { key: 'billable_visits', label: 'Billable visits', bytes: false },
  { key: 'network_origin_bytes', label: 'Network from origin', bytes: true },
  { key: 'network_cdn_bytes', label: 'Network from CDN', bytes: true },
  { key: 'network_total_bytes', label: 'Network total', bytes: true },
  { key: 'storage_file_bytes', label: 'Storage: files', bytes: true },
  { key: 'storage_database_bytes', label: 'Storage: database', bytes: true },
  { key: 'request_origin_count', label: 'Requests to origin', bytes: false },
];
/** One colour per environment line (readable on light and dark backgrounds). */
export const SERIES_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];

const DAY_MS = 86_400_000;
const isoDate = (d: Date) => d.toISOString().slice(0, 10);

/**
 * Usage charts: one metric at a time over a chosen window (at most 31 days, the API's rule), one line
 * per environment, drawn by uPlot; the same numbers in a table under the chart.
 */
export function UsagePage(props: { accountId: string }) {
  const today = new Date();
  const [first, setFirst] = useState(isoDate(new Date(today.getTime() - 29 * DAY_MS)));
  const [last, setLast] = useState(isoDate(today));
  const [metric, setMetric] = useState<Metric>('visit_count');
  const [usage, setUsage] = useState<AccountUsage | null>(null);
  const show = useSubmit(async (api) => {
    const data = await api.run(() =>
      api.client.get('/v1/accounts/{account_id}/usage', {
        params: {
          path: { account_id: props.accountId },
          query: { first_date: first, last_date: last, limit: 100 },
        },
      }),
    );
    setUsage(data);
  });
  useEffect(() => {
    void show.run(undefined);
  }, [props.accountId]);
  const ids = { first: useId(), last: useId() };
  const chosen = METRICS.find((m) => m.key === metric) ?? METRICS[0];

  return (
    <section>
      <p class="crumbs">
        <a href={href.accounts()}>Accounts</a> / <a href={href.account(props.accountId)}>Sites</a>
      </p>
      <h1>Usage</h1>
      <form onSubmit={show.submit} aria-label="Usage window" noValidate class="window">
        {show.message && <Alert>{show.message}</Alert>}
        <DateField
          id={ids.first}
          label="From"
          name="first_date"
          value={first}
          onInput={setFirst}
          error={show.errors.first_date}
        />
        <DateField
          id={ids.last}
          label="To"
          name="last_date"
          value={last}
          onInput={setLast}
          error={show.errors.last_date}
        />
        <button type="submit" disabled={show.busy}>
          {show.busy ? 'Loading…' : 'Show'}
        </button>
      </form>
      <Select
        label="Metric"
        name="metric"
        value={metric}
        onChange={(v) => setMetric(v as Metric)}
        options={METRICS.map((m) => ({ value: m.key, label: m.label }))}
      />
      {!usage && !show.message && <Loading />}
      {usage && chosen && <Chart usage={usage} metric={chosen} />}
    </section>
  );
}

function DateField(props: {
  id: string;
  label: string;
  name: string;
  value: string;
  onInput: (v: string) => void;
  error?: string | undefined;
}) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        type="date"
        name={props.name}
        value={props.value}
        aria-invalid={props.error ? 'true' : undefined}
        aria-describedby={props.error ? `${props.id}-error` : undefined}
        onInput={(e) => props.onInput((e.currentTarget as HTMLInputElement).value)}
      />
      {props.error && (
        <p class="field-error" id={`${props.id}-error`} data-field={props.name}>
          {props.error}
        </p>
      )}
    </div>
  );
}

/** Every date of the window, and each environment's value on it (null when there is none). */
function seriesOf(usage: AccountUsage, metric: Metric) {
  const dates: string[] = [];
  for (
    let t = Date.parse(`${usage.first_date}T00:00:00Z`);
    t <= Date.parse(`${usage.last_date}T00:00:00Z`);
    t += DAY_MS
  )
    dates.push(isoDate(new Date(t)));
  const lines = usage.environment_metrics.map((env) => {
    const byDate = new Map(env.metrics.map((m) => [m.date, m[metric]]));
    return {
      name: env.environment_name,
      values: dates.map((d) => (byDate.get(d) == null ? null : Number(byDate.get(d)))),
    };
  });
  return { dates, lines };
}

function Chart(props: { usage: AccountUsage; metric: (typeof METRICS)[number] }) {
  const box = useRef<HTMLDivElement>(null);
  const { dates, lines } = seriesOf(props.usage, props.metric.key);
  const format = (v: number | null) =>
    v === null ? '—' : props.metric.bytes ? formatBytes(v) : v.toLocaleString();
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = Math.max(260, Math.min(el.clientWidth || 600, 900));
    const style = getComputedStyle(document.documentElement);
    const ink = style.getPropertyValue('--fg').trim() || '#1b1f24';
    const grid = style.getPropertyValue('--border').trim() || '#d0d7de';
    const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const plot = new uPlot(
      {
        width,
        height: Math.round(Math.min(320, width * 0.6)),
        title: `${props.metric.label}, ${props.usage.first_date} to ${props.usage.last_date}`,
        scales: { x: { time: true } },
        axes: [
          axis,
          {
            ...axis,
            size: 70,
            values: (_u: uPlot, ticks: number[]) =>
              ticks.map((v) => (props.metric.bytes ? formatBytes(v) : String(v))),
          },
        ],
        series: [
          { label: 'Date' },
          ...lines.map((l, i) => ({
            label: l.name,
            stroke: SERIES_COLOURS[i % SERIES_COLOURS.length],
            width: 2,
            spanGaps: false,
            points: { show: true, size: 6 },
            value: (_u: uPlot, v: number | null) => format(v),
          })),
        ],
      },
      [
        dates.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000),
        ...lines.map((l) => l.values),
      ] as uPlot.AlignedData,
      el,
    );
    return () => plot.destroy();
  }, [props.usage, props.metric.key]);

  return (
    <figure class="chart-figure" aria-labelledby="chart-caption">
      <figcaption id="chart-caption">
        {props.metric.label} by environment ({lines.length} environment{lines.length === 1 ? '' : 's'})
      </figcaption>
      {/* The canvas is a picture of the table below, which is what screen readers read. */}
      <div class="chart" ref={box} aria-hidden="true" data-testid="usage-chart" />
      <DataTable
        label={`${props.metric.label} per day and environment`}
        testId="usage-table"
        columns={['Date', ...lines.map((l) => l.name)]}
        // A day no environment has a value for is left out.
        rows={dates
          .map((date, row) => ({ date, row }))
          .filter(({ row }) => lines.some((l) => l.values[row] !== null))}
        rowKey={({ date }) => date}
        empty="No environment has usage in this window."
        cells={({ date, row }) => (
          <>
            <th scope="row">{date}</th>
            {lines.map((l) => (
              <td key={l.name}>{format(l.values[row] ?? null)}</td>
            ))}
          </>
        )}
      />
    </figure>
  );
}
