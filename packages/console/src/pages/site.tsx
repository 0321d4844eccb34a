import type { Operation, paths } from '@hostplane/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { messageOf, useApi, useOperation, useSubmit } from '../api.js';
import { href } from '../router.js';
import {
  ACTIONS,
  Alert,
  Confirm,
  DataTable,
  Field,
  ListField,
  Loading,
  OperationStatus,
  Select,
  splitList,
} from '../ui.js';

type Json<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer T } } };
}
  ? T
  : never;
type Site = Json<'/v1/sites/{site_id}', 'get'>;
type Install = Json<'/v1/installs', 'get'>['results'][number];
type Transfer = Json<'/v1/sites/{site_id}/site_transfers', 'get'>['results'][number];
type Account = Json<'/v1/accounts', 'get'>['results'][number];
type Schedule = Json<'/v1/site_reports/schedules', 'get'>['schedules'][number];
type Report = Json<'/v1/site_reports', 'get'>['reports'][number];
type Section = Json<'/v1/site_reports/sections', 'get'>['sections'][number];

const ENVIRONMENTS = ['production', 'staging', 'development'] as const;

/**
 * A site: its installs (with a form that creates one and waits until it is active), its transfers
 * and its report schedules. First level: the site, its transfers, the accounts, the schedules, the
 * reports and the report sections side by side; second level: the installs' statuses.
 */
export function SitePage(props: { siteId: string }) {
  const api = useApi();
  const site_id = props.siteId;
  const [site, setSite] = useState<Site | null>(null);
  const [installs, setInstalls] = useState<Map<string, Install>>(new Map());
  const [transfers, setTransfers] = useState<Transfer[] | null>(null);
  const [accounts, setAccounts] = useState<Account[] | null>(null);
  const [schedules, setSchedules] = useState<Schedule[] | null>(null);
  const [reports, setReports] = useState<Report[] | null>(null);
  const [sections, setSections] = useState<Section[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const loadSite = useCallback(
    () =>
      api.client.get('/v1/sites/{site_id}', { params: { path: { site_id } } }).then(async (s) => {
        const list = await api.client.listAll((page) =>
          api.client.get('/v1/installs', { params: { query: { ...page, account_id: s.account.id } } }),
        );
        return [s, new Map(list.filter((i) => i.site?.id === s.id).map((i) => [i.id, i]))] as const;
      }),
    [api, site_id],
  );
  const loadTransfers = useCallback(
    () =>
      api.client.listAll((page) =>
        api.client.get('/v1/sites/{site_id}/site_transfers', { params: { path: { site_id }, query: page } }),
      ),
    [api, site_id],
  );
  const loadSchedules = useCallback(
    () =>
      api.client
        .get('/v1/site_reports/schedules', { params: { query: { site_id } } })
        .then((r) => r.schedules),
    [api, site_id],
  );
  const reloadSite = () =>
    api.run(loadSite).then(([s, i]) => {
      setSite(s);
      setInstalls(i);
    });

  useEffect(() => {
    api
      .run(() =>
        Promise.all([
          loadSite(),
          loadTransfers(),
          api.client.listAll((page) => api.client.get('/v1/accounts', { params: { query: page } })),
          loadSchedules(),
          api.client.get('/v1/site_reports', { params: { query: { site_id } } }).then((r) => r.reports),
          api.client.get('/v1/site_reports/sections').then((r) => r.sections),
        ]),
      )
      .then(
        ([[s, i], t, a, sc, r, se]) => {
          setSite(s);
          setInstalls(i);
          setTransfers(t);
          setAccounts(a);
          setSchedules(sc);
          setReports(r);
          setSections(se);
        },
        (e) => setError(messageOf(e)),
      );
  }, [api, site_id]);

  return (
    <section>
      <p class="crumbs">
        <a href={href.accounts()}>Accounts</a>
        {site && (
          <>
            {' / '}
            <a href={href.account(site.account.id)}>Sites</a>
          </>
        )}
      </p>
      <h1>{site ? `Site ${site.name}` : 'Site'}</h1>
      {error && <Alert>{error}</Alert>}
      {!site && !error && <Loading />}
      {site && <Installs site={site} installs={installs} reload={reloadSite} />}
      {site && transfers && accounts && (
        <Transfers
          site={site}
          transfers={transfers}
          accounts={accounts.filter((a) => a.id !== site.account.id)}
          reload={() => api.run(loadTransfers).then(setTransfers)}
        />
      )}
      {site && schedules && sections && reports && (
        <Reports
          site={site}
          schedules={schedules}
          sections={sections}
          reports={reports}
          reload={() => api.run(loadSchedules).then(setSchedules)}
        />
      )}
    </section>
  );
}

function Installs(props: { site: Site; installs: Map<string, Install>; reload: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState<(typeof ENVIRONMENTS)[number]>('production');
  const [created, setCreated] = useState<{ id: string; name: string; status: string } | null>(null);
  const provision = useOperation();
  // Issue 29: provisioning's WordPress administrator, its password shown once (decision 116).
  const [admin, setAdmin] = useState<WordPressAdmin | null>(null);
  const { submit, busy, errors, message } = useSubmit(
    async (api) => {
      setCreated(null);
      setAdmin(null);
      const { data } = await api.run(() =>
        api.client.post('/v1/installs', {
          body: { name, account_id: props.site.account.id, site_id: props.site.id, environment },
        }),
      );
      setCreated(data);
      await props.reload();
      // The install's provisioning operation, polled with back-off; then the install itself.
      const ops = await api.run(() =>
        api.client.get('/v1/installs/{install_id}/operations', {
          params: { path: { install_id: data.id } },
        }),
      );
      const op = ops.results.find((o) => o.type === 'provision_install');
      if (op) setAdmin((await provision.follow(api, op.id)).wordpress_admin ?? null);
      const now = await api.run(() =>
        api.client.get('/v1/installs/{install_id}', { params: { path: { install_id: data.id } } }),
      );
      setCreated(now);
      setName('');
      await props.reload();
    },
    {
      failed: 'The install could not be provisioned',
      summary: 'The install was not created: see the fields below.',
    },
  );

  return (
    <section aria-labelledby="installs-title">
      <h2 id="installs-title">Installs</h2>
      <DataTable
        label={`Installs of ${props.site.name}`}
        columns={['Install', 'Environment', 'Status']}
        rows={props.site.installs}
        rowKey={(i) => i.id}
        empty="No install yet."
        cells={(i) => (
          <>
            <td>
              <a href={href.install(i.id)}>{i.name}</a>
            </td>
            <td>{i.environment ?? '—'}</td>
            <td data-testid={`install-status-${i.name}`}>{props.installs.get(i.id)?.status ?? '—'}</td>
          </>
        )}
      />
      <form onSubmit={submit} aria-label="New install" noValidate>
        <h3>New install</h3>
        {message && <Alert>{message}</Alert>}
        <Field
          label="Install name"
          name="name"
          value={name}
          onInput={setName}
          error={errors.name}
          hint="3 to 14 lowercase letters and digits, starting with a letter."
        />
        <Select
          label="Environment"
          name="environment"
          value={environment}
          onChange={(v) => setEnvironment(v as typeof environment)}
          options={ENVIRONMENTS.map((e) => ({ value: e, label: e }))}
          error={errors.environment}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create install'}
        </button>
      </form>
      <OperationStatus label="Provisioning" operation={provision.operation} testId="provision-status" />
      {created && (
        <p role="status" data-testid="new-install">
          Install <a href={href.install(created.id)}>{created.name}</a> is {created.status}.
        </p>
      )}
      {created && admin && <AdminOnce admin={admin} installId={created.id} />}
    </section>
  );
}

type WordPressAdmin = NonNullable<Operation['wordpress_admin']>;

/**
 * Issue 29 (defect 7): the WordPress administrator provisioning made. Its password is in the
 * operation only the first time an owner reads it, so it is shown now, saying so; without it (another
 * tab read it, or not an owner) the install's page signs in without a password.
 */
function AdminOnce(props: { admin: WordPressAdmin; installId: string }) {
  const { admin } = props;
  return (
    <section class="alert info" aria-labelledby="wp-admin-title" data-testid="wordpress-admin">
      <h3 id="wp-admin-title">WordPress administrator</h3>
      {admin.password ? (
        <p>
          <strong>This password is shown this once: it will not be shown again.</strong> Keep it now, or sign
          in from the <a href={href.install(props.installId)}>install's page</a> without it.
        </p>
      ) : (
        <p>
          Sign in without a password from the <a href={href.install(props.installId)}>install's page</a>.
        </p>
      )}
      <dl class="facts">
        <dt>Username</dt>
        <dd>
          <code>{admin.username}</code>
        </dd>
        {admin.password && (
          <>
            <dt>Password</dt>
            <dd>
              <code data-testid="wordpress-password">{admin.password}</code>
            </dd>
          </>
        )}
        <dt>Sign in at</dt>
        <dd>
          <a href={admin.login_url}>{admin.login_url}</a>
        </dd>
      </dl>
    </section>
  );
}

/** `datetime-local` text (local time) as an RFC 3339 instant. */
function toInstant(local: string): string | null {
  if (!local) return null;
  const t = new Date(local);
  return Number.isNaN(t.getTime()) ? local : t.toISOString();
}

function Transfers(props: {
  site: Site;
  transfers: Transfer[];
  accounts: Account[];
  reload: () => Promise<void>;
}) {
  const [destination, setDestination] = useState(props.accounts[0]?.id ?? '');
  const [when, setWhen] = useState('');
  const [cancelling, setCancelling] = useState<Transfer | null>(null);
  const start = useSubmit(
    async (api) => {
      const scheduled_time = toInstant(when);
      await api.run(() =>
        api.client.post('/v1/sites/{site_id}/site_transfers', {
          params: { path: { site_id: props.site.id } },
          body: { destination_account_id: destination, ...(scheduled_time && { scheduled_time }) },
        }),
      );
      setWhen('');
      await props.reload();
    },
    { summary: 'The transfer was not started: see the fields below.' },
  );
  const cancel = useSubmit(async (api, chosen: Transfer) => {
    setCancelling(null);
    await api.run(() =>
      api.client.delete('/v1/sites/{site_id}/site_transfers/{transfer_id}', {
        params: { path: { site_id: props.site.id, transfer_id: chosen.id } },
      }),
    );
    await props.reload();
  });
  const accountName = (id: string) => props.accounts.find((a) => a.id === id)?.name ?? id;

  return (
    <section aria-labelledby="transfers-title">
      <h2 id="transfers-title">Transfers</h2>
      {cancel.message && <Alert>{cancel.message}</Alert>}
      <DataTable
        label="Transfers of this site"
        testId="transfers"
        columns={['To account', 'Status', 'Scheduled for', ACTIONS]}
        rows={props.transfers}
        rowKey={(t) => t.id}
        empty="No transfer yet."
        cells={(t) => (
          <>
            <td>{accountName(t.destination_account)}</td>
            <td data-testid="transfer-status">{t.status}</td>
            <td>
              {t.scheduled_time ? (
                <time dateTime={t.scheduled_time}>{new Date(t.scheduled_time).toLocaleString()}</time>
              ) : (
                'now'
              )}
            </td>
            <td>
              {(t.status === 'scheduled' || t.status === 'pending') && (
                <button
                  type="button"
                  class="secondary"
                  aria-label={`Cancel the transfer to ${accountName(t.destination_account)}`}
                  onClick={() => setCancelling(t)}
                >
                  Cancel
                </button>
              )}
            </td>
          </>
        )}
      />
      {cancelling && (
        <Confirm
          title="Cancel this transfer?"
          confirm="Cancel the transfer"
          onConfirm={() => cancel.run(cancelling)}
          onCancel={() => setCancelling(null)}
        >
          <p>
            The site {props.site.name} stays in this account; the transfer to{' '}
            {accountName(cancelling.destination_account)} will not happen.
          </p>
        </Confirm>
      )}
      {props.accounts.length === 0 ? (
        <p class="muted">You belong to no other account to transfer this site to.</p>
      ) : (
        <form onSubmit={start.submit} aria-label="Transfer this site" noValidate>
          <h3>Transfer this site</h3>
          {start.message && <Alert>{start.message}</Alert>}
          <Select
            label="Destination account"
            name="destination_account_id"
            value={destination}
            onChange={setDestination}
            options={props.accounts.map((a) => ({ value: a.id, label: a.name }))}
            error={start.errors.destination_account_id}
          />
          <div class="field">
            <label for="transfer-when">When (optional, local time)</label>
            <input
              id="transfer-when"
              type="datetime-local"
              name="scheduled_time"
              value={when}
              aria-invalid={start.errors.scheduled_time ? 'true' : undefined}
              aria-describedby={`transfer-when-hint${start.errors.scheduled_time ? ' transfer-when-error' : ''}`}
              onInput={(e) => setWhen((e.currentTarget as HTMLInputElement).value)}
            />
            <p class="hint" id="transfer-when-hint">
              Empty for now; otherwise between 1 hour and 7 days from now.
            </p>
            {start.errors.scheduled_time && (
              <p class="field-error" id="transfer-when-error" data-field="scheduled_time">
                {start.errors.scheduled_time}
              </p>
            )}
          </div>
          <button type="submit" disabled={start.busy}>
            {start.busy ? 'Starting…' : when ? 'Schedule the transfer' : 'Transfer now'}
          </button>
        </form>
      )}
    </section>
  );
}

function Reports(props: {
  site: Site;
  schedules: Schedule[];
  sections: Section[];
  reports: Report[];
  reload: () => Promise<void>;
}) {
  const sorted = [...props.sections].sort((a, b) => a.order - b.order);
  const [title, setTitle] = useState('');
  const [recipients, setRecipients] = useState('');
  const [every, setEvery] = useState('MONTHLY:1');
  const [chosen, setChosen] = useState<Set<string>>(() => new Set(sorted.map((s) => s.name)));
  const [created, setCreated] = useState<string | null>(null);
  const [unit, value] = every.split(':') as ['DAYS' | 'MONTHLY', string];
  const create = useSubmit(
    async (api) => {
      setCreated(null);
      const { data } = await api.run(() =>
        api.client.post('/v1/site_reports/schedules', {
          body: {
            site_id: props.site.id,
            title,
            recipients: splitList(recipients).map((email) => ({ email })),
            frequency: { unit, value: Number(value) },
            sections: sorted.filter((s) => chosen.has(s.name)).map((s) => ({ name: s.name })),
          },
        }),
      );
      setCreated(data.message);
      setTitle('');
      await props.reload();
    },
    { summary: 'The schedule was not created: see the fields below.' },
  );
  const remove = useSubmit(async (api, id: string) => {
    await api.run(() =>
      api.client.delete('/v1/site_reports/schedules/{schedule_id}', {
        params: { path: { schedule_id: id } },
      }),
    );
    await props.reload();
  });

  return (
    <section aria-labelledby="reports-title">
      <h2 id="reports-title">Reports</h2>
      {remove.message && <Alert>{remove.message}</Alert>}
      {props.schedules.length === 0 ? (
        <p>No report schedule.</p>
      ) : (
        <ul class="cards" data-testid="schedules">
          {props.schedules.map((s) => (
            <li key={s.uuid}>
              <h3>{s.title}</h3>
              <p>
                Every {s.frequency.value} {s.frequency.unit === 'DAYS' ? 'day(s)' : 'month(s)'}; next on{' '}
                <time dateTime={s.next_scheduled_date}>{s.next_scheduled_date.slice(0, 10)}</time>; to{' '}
                {s.recipients.map((r) => r.email).join(', ')}
              </p>
              <p class="muted">Sections: {s.sections.map((x) => x.name).join(', ')}</p>
              <button
                type="button"
                class="secondary"
                aria-label={`Delete the schedule ${s.title}`}
                onClick={() => remove.run(s.uuid)}
              >
                Delete
              </button>
            </li>
          ))}
        </ul>
      )}
      <SentReports reports={props.reports} />
      <form onSubmit={create.submit} aria-label="New report schedule" noValidate>
        <h3>New report schedule</h3>
        {create.message && <Alert>{create.message}</Alert>}
        <Field
          label="Report title"
          name="title"
          value={title}
          onInput={setTitle}
          error={create.errors.title}
        />
        <ListField
          label="Recipients (email addresses)"
          name="recipients"
          value={recipients}
          onInput={setRecipients}
          error={create.errors.recipients ?? create.errors.email}
        />
        <Select
          label="Frequency"
          name="frequency"
          value={every}
          onChange={setEvery}
          options={[
            { value: 'MONTHLY:1', label: 'Every month' },
            { value: 'MONTHLY:3', label: 'Every three months' },
            { value: 'DAYS:7', label: 'Every week' },
            { value: 'DAYS:1', label: 'Every day' },
          ]}
          error={create.errors.frequency ?? create.errors.value}
        />
        <fieldset>
          <legend>Sections</legend>
          {sorted.map((s) => (
            <label key={s.name} class="check">
              <input
                type="checkbox"
                name="sections"
                value={s.name}
                checked={chosen.has(s.name)}
                disabled={s.mandatory}
                onChange={(e) => {
                  const next = new Set(chosen);
                  if ((e.currentTarget as HTMLInputElement).checked) next.add(s.name);
                  else next.delete(s.name);
                  setChosen(next);
                }}
              />{' '}
              {s.display_text}
            </label>
          ))}
          {create.errors.sections && (
            <p class="field-error" data-field="sections">
              {create.errors.sections}
            </p>
          )}
        </fieldset>
        <button type="submit" disabled={create.busy}>
          {create.busy ? 'Saving…' : 'Create schedule'}
        </button>
        {created && (
          <span role="status" class="muted">
            {' '}
            {created}.
          </span>
        )}
      </form>
      <ReportPreview
        title={title || 'Untitled report'}
        site={props.site.name}
        sections={sorted.filter((s) => chosen.has(s.name))}
        every={every}
      />
    </section>
  );
}

const day = (iso: string) => iso.slice(0, 10);
/** A report's period as the report itself states it: its first and last day (the end is exclusive). */
const periodOf = (r: Report) =>
  `${day(r.date_range.start_date)} to ${day(new Date(Date.parse(r.date_range.end_date) - 1).toISOString())}`;

/**
 * The console's CSP (style-src 'self') is inherited by a srcdoc frame and blocks the report's own
 * <style>: its rules are applied through the CSSOM instead (a constructed stylesheet, which style-src
 * does not govern), so the console keeps its CSP and the report looks as it was mailed.
 */
function adoptReportStyles(frame: HTMLIFrameElement) {
  const doc = frame.contentDocument;
  const realm = frame.contentWindow as (Window & typeof globalThis) | null;
  if (!doc || !realm) return;
  const sheet = new realm.CSSStyleSheet();
  sheet.replaceSync([...doc.querySelectorAll('style')].map((s) => s.textContent ?? '').join('\n'));
  doc.adoptedStyleSheets = [sheet];
}

/**
 * The reports that were generated and mailed, newest first, and one of them as it was sent: the
 * API's HTML document in a sandboxed frame (no script runs in it; the document has no script nor
 * external asset of its own). Same-origin only so that the console can style it (adoptReportStyles).
 */
function SentReports(props: { reports: Report[] }) {
  const [shown, setShown] = useState<{ report: Report; html: string } | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const view = useSubmit(async (api, report: Report) => {
    const html = await api.run(() =>
      api.client.get('/v1/site_reports/{report_id}/download', {
        params: { path: { report_id: report.uuid } },
        parseAs: 'text',
      }),
    );
    setShown({ report, html: String(html) });
  });
  useEffect(() => heading.current?.focus(), [shown]);
  return (
    <section aria-labelledby="sent-reports-title">
      <h3 id="sent-reports-title">Sent reports</h3>
      {view.message && <Alert>{view.message}</Alert>}
      <DataTable
        label="Sent reports, newest first"
        testId="sent-reports"
        stack
        columns={['Title', 'Period', 'Sent', 'To', ACTIONS]}
        rows={props.reports}
        rowKey={(r) => r.uuid}
        empty="No report sent yet."
        cells={(r) => (
          <>
            <td>{r.title}</td>
            <td>{periodOf(r)}</td>
            <td data-label="Sent">
              <time dateTime={r.created_at}>{new Date(r.created_at).toLocaleString()}</time>
            </td>
            <td data-label="To">{r.recipients.map((x) => x.email).join(', ')}</td>
            <td>
              <button
                type="button"
                class="secondary"
                disabled={view.busy}
                aria-label={`View the report ${r.title} of ${periodOf(r)}`}
                onClick={() => view.run(r)}
              >
                View
              </button>
            </td>
          </>
        )}
      />
      {shown && (
        <figure class="sent-report" data-testid="sent-report">
          <figcaption>
            <h4 ref={heading} tabIndex={-1}>
              {shown.report.title}, {periodOf(shown.report)}
            </h4>
            <button type="button" class="secondary" onClick={() => setShown(null)}>
              Close the report
            </button>
          </figcaption>
          <iframe
            class="preview"
            title={`The report ${shown.report.title} as sent`}
            sandbox="allow-same-origin"
            srcDoc={shown.html}
            onLoad={(e) => adoptReportStyles(e.currentTarget)}
          />
        </figure>
      )}
    </section>
  );
}

/** What the report will look like: its title, its period, its sections in order with their previews. */
function ReportPreview(props: { title: string; site: string; sections: Section[]; every: string }) {
  const [unit, value] = props.every.split(':');
  const n = Number(value);
  const period =
    unit === 'DAYS'
      ? `the last ${n} day${n === 1 ? '' : 's'}`
      : `the last ${n === 1 ? 'month' : `${n} months`}`;
  return (
    <figure class="report-preview" aria-labelledby="report-preview-title" data-testid="report-preview">
      <figcaption id="report-preview-title">Preview of the report</figcaption>
      <h3>{props.title}</h3>
      <p class="muted">
        {props.site}, covering {period}
      </p>
      <ol>
        {props.sections.map((s) => (
          <li key={s.name}>
            <h4>{s.display_text}</h4>
            <img src={s.image_url} alt={`Preview of the section ${s.display_text}`} width={240} />
          </li>
        ))}
      </ol>
    </figure>
  );
}
