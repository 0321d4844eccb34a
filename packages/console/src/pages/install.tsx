import type { paths } from '@hostplane/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Api, messageOf, useApi, useOperation, useSubmit } from '../api.js';
import { href } from '../router.js';
import {
  ACTIONS,
  Alert,
  Confirm,
  DataTable,
  Field,
  formatBytes,
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
type Install = Json<'/v1/installs/{install_id}', 'get'>;
type Domain = Json<'/v1/installs/{install_id}/domains', 'get'> extends { results: (infer D)[] } ? D : never;
type Backup = Json<'/v1/installs/{install_id}/backups', 'get'> extends { results: (infer B)[] } ? B : never;
type Certificate = Json<'/v1/installs/{install_id}/ssl_certificates', 'get'>['certificates'][number];
type Usage = Json<'/v1/installs/{install_id}/usage', 'get'>;
type Sibling = Json<'/v1/installs', 'get'>['results'][number];

/**
 * An install with its domains, certificates, backups and disk usage: five reads side by side, then
 * the account's other installs (the copy destinations); two levels, no deeper.
 */
export function InstallPage(props: { installId: string }) {
  const api = useApi();
  const install_id = props.installId;
  const [install, setInstall] = useState<Install | null>(null);
  const [domains, setDomains] = useState<Domain[] | null>(null);
  const [backups, setBackups] = useState<Backup[] | null>(null);
  const [certificates, setCertificates] = useState<Certificate[] | null>(null);
  const [usage, setUsage] = useState<Usage | null>(null);
  const [siblings, setSiblings] = useState<Sibling[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const path = { path: { install_id } };
  const loadDomains = useCallback(
    () =>
      api.client.listAll((page) =>
        api.client.get('/v1/installs/{install_id}/domains', { params: { ...path, query: page } }),
      ),
    [api, install_id],
  );
  const loadBackups = useCallback(
    () =>
      api.client
        .get('/v1/installs/{install_id}/backups', { params: { ...path, query: { limit: 20 } } })
        .then((page) => page.results),
    [api, install_id],
  );
  const loadUsage = useCallback(
    () => api.client.get('/v1/installs/{install_id}/usage', { params: path }),
    [api, install_id],
  );
  useEffect(() => {
    api
      .run(() =>
        Promise.all([
          api.client.get('/v1/installs/{install_id}', { params: path }),
          loadDomains(),
          loadBackups(),
          api.client
            .get('/v1/installs/{install_id}/ssl_certificates', { params: { ...path, query: { limit: 50 } } })
            .then((c) => c.certificates),
          loadUsage(),
        ]),
      )
      .then(([i, d, b, c, u]) => {
        setInstall(i);
        setDomains(d);
        setBackups(b);
        setCertificates(c);
        setUsage(u);
        return api.run(() =>
          api.client.listAll((page) =>
            api.client.get('/v1/installs', { params: { query: { ...page, account_id: i.account.id } } }),
          ),
        );
      })
      .then(
        (all) => setSiblings(all.filter((s) => s.id !== install_id)),
        (e) => setError(messageOf(e)),
      );
  }, [api, install_id]);

  return (
    <section>
      <p class="crumbs">
        <a href={href.accounts()}>Accounts</a>
        {install && (
          <>
            {' / '}
            <a href={href.account(install.account.id)}>Sites</a>
            {install.site && (
              <>
                {' / '}
                <a href={href.site(install.site.id)}>Site</a>
              </>
            )}
          </>
        )}
      </p>
      <h1>{install ? `Install ${install.name}` : 'Install'}</h1>
      {error && <Alert>{error}</Alert>}
      {!install && !error && <Loading />}
      {install && (
        <dl class="facts">
          <dt>Status</dt>
          <dd data-testid="install-status">{install.status}</dd>
          <dt>Environment</dt>
          <dd>{install.environment ?? '—'}</dd>
          <dt>CNAME</dt>
          <dd>
            <code>{install.cname}</code>
          </dd>
          <dt>Primary domain</dt>
          <dd>{install.primary_domain ?? '—'}</dd>
        </dl>
      )}
      {install && <WordPress install={install} />}
      {domains && (
        <Domains
          installId={install_id}
          domains={domains}
          reload={() => api.run(loadDomains).then(setDomains)}
        />
      )}
      {certificates && <Certificates certificates={certificates} />}
      {install && backups && (
        <Backups install={install} backups={backups} reload={() => api.run(loadBackups).then(setBackups)} />
      )}
      {install && siblings && <CopyInstall install={install} destinations={siblings} />}
      {install && <PurgeCache installId={install_id} />}
      {install && usage && (
        <DiskUsage installId={install_id} usage={usage} reload={() => api.run(loadUsage).then(setUsage)} />
      )}
    </section>
  );
}

/**
 * Issue 29 (defect 7): the site itself (its primary domain, else its cname) and a single-use sign-in
 * to its wp-admin, made by the API when asked (POST .../wordpress_sign_in): nobody needs the password.
 */
function WordPress(props: { install: Install }) {
  const { install } = props;
  const [link, setLink] = useState<{ url: string; expires_at: string; simulated: boolean } | null>(null);
  const site = `http://${install.primary_domain ?? install.cname}/`;
  const { run, busy, message } = useSubmit<void>(async (api) => {
    setLink(null);
    const { data } = await api.run(() =>
      api.client.post('/v1/installs/{install_id}/wordpress_sign_in', {
        params: { path: { install_id: install.id } },
      }),
    );
    setLink(data);
  });
  return (
    <section aria-labelledby="wordpress-title">
      <h2 id="wordpress-title">WordPress</h2>
      <p>
        The site:{' '}
        <a href={site} data-testid="site-link">
          {site}
        </a>
      </p>
      {message && <Alert>{message}</Alert>}
      {install.status === 'active' ? (
        <button type="button" onClick={() => run()} disabled={busy}>
          {busy ? 'Making a sign-in link…' : 'Sign in to WordPress'}
        </button>
      ) : (
        <p class="muted">Sign-in is offered once the install is active.</p>
      )}
      {link && (
        <p role="status" data-testid="sign-in-link">
          <a href={link.url} target="_blank" rel="noopener noreferrer">
            Open WordPress admin
          </a>{' '}
          (works once, until {new Date(link.expires_at).toLocaleTimeString()})
          {link.simulated && ' · This host is simulated: the link leads to no real site.'}
        </p>
      )}
    </section>
  );
}

function Domains(props: { installId: string; domains: Domain[]; reload: () => Promise<void> }) {
  const [name, setName] = useState('');
  const { submit, busy, errors, message } = useSubmit(async (api) => {
    await api.run(() =>
      api.client.post('/v1/installs/{install_id}/domains', {
        params: { path: { install_id: props.installId } },
        body: { name },
      }),
    );
    setName('');
    await props.reload();
  });

  return (
    <section aria-labelledby="domains-title">
      <h2 id="domains-title">Domains</h2>
      {props.domains.length === 0 && <p>No domain yet.</p>}
      <ul class="cards">
        {props.domains.map((d) => (
          <li key={d.id} class="domain">
            <h3>
              {d.name} {d.primary && <span class="tag">primary</span>}
            </h3>
            <p>
              Ownership:{' '}
              <strong>
                {d.ownership_status === 'TXT_VERIFIED' ? 'verified' : 'waiting for the TXT record'}
              </strong>
              {' · '}Network: {d.network_details.network_info.status.toLowerCase()}
              {d.redirects_to.length > 0 && (
                <> · Redirects to {d.redirects_to.map((r) => r.name).join(', ')}</>
              )}
            </p>
            {d.ownership_status !== 'TXT_VERIFIED' && d.txt_verification_key && d.txt_verification_value && (
              <VerificationRecord name={d.txt_verification_key} value={d.txt_verification_value} />
            )}
          </li>
        ))}
      </ul>
      <form onSubmit={submit} aria-label="Add a domain" noValidate>
        {message && <Alert>{message}</Alert>}
        <Field
          label="Domain name"
          name="domain"
          value={name}
          onInput={setName}
          error={errors.name}
          hint="For example www.example.com"
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Adding…' : 'Add domain'}
        </button>
      </form>
    </section>
  );
}

function VerificationRecord(props: { name: string; value: string }) {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    navigator.clipboard?.writeText(props.value).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return (
    <div class="record" data-testid="verification-record">
      <p>Add this DNS record to prove you own the domain:</p>
      <dl class="facts">
        <dt>Type</dt>
        <dd>TXT</dd>
        <dt>Name</dt>
        <dd>
          <code>{props.name}</code>
        </dd>
        <dt>Value</dt>
        <dd>
          <code class="value">{props.value}</code>
        </dd>
      </dl>
      <button type="button" onClick={copy}>
        Copy the value
      </button>
      <span role="status" class="muted">
        {copied ? ' Copied.' : ''}
      </span>
    </div>
  );
}

/** Days from now to an instant, for "expires in N days". */
function daysUntil(iso: string): number {
  return Math.floor((Date.parse(iso) - Date.now()) / 86_400_000);
}

/** A certificate's expiry date and the days left, in red under two weeks. */
function Expiry(props: { time: string }) {
  const days = daysUntil(props.time);
  return (
    <>
      <time dateTime={props.time}>{props.time.slice(0, 10)}</time>{' '}
      <span class={days < 14 ? 'field-error' : 'muted'}>
        {days < 0 ? '(expired)' : `(in ${days} day${days === 1 ? '' : 's'})`}
      </span>
    </>
  );
}

function Certificates(props: { certificates: Certificate[] }) {
  return (
    <section aria-labelledby="certificates-title">
      <h2 id="certificates-title">Certificates</h2>
      <DataTable
        label="Certificates and when they expire"
        testId="certificates"
        columns={['Common name', 'Domains', 'Status', 'Expires']}
        rows={props.certificates}
        rowKey={(c) => c.uuid}
        empty="No imported certificate yet."
        cells={(c) => (
          <>
            <td>{c.common_name}</td>
            <td>{c.domains.join(', ')}</td>
            <td>{c.status.toLowerCase()}</td>
            <td>
              <Expiry time={c.expires_time} />
            </td>
          </>
        )}
      />
    </section>
  );
}

function Backups(props: { install: Install; backups: Backup[]; reload: () => Promise<void> }) {
  const install_id = props.install.id;
  const [description, setDescription] = useState('');
  const [emails, setEmails] = useState('');
  const backup = useOperation();
  const take = useSubmit(
    async (api) => {
      const started = await api.run(() =>
        api.client.post('/v1/installs/{install_id}/backups', {
          params: { path: { install_id } },
          body: { description, notification_emails: splitList(emails) },
        }),
      );
      await props.reload();
      // Polls the operation with back-off, then the list.
      if (started.location) await backup.follow(api, started.location);
      await props.reload();
      setDescription('');
    },
    { failed: 'The backup failed' },
  );

  const [restoring, setRestoring] = useState<Backup | null>(null);
  const restore = useOperation();
  const runRestore = useSubmit(
    async (api, chosen: Backup) => {
      setRestoring(null);
      const started = await api.run(() =>
        api.client.post('/v1/installs/{install_id}/backups/{backup_id}/restore', {
          params: { path: { install_id, backup_id: chosen.id } },
          body: { notification_emails: splitList(emails) },
        }),
      );
      if (started.location) await restore.follow(api, started.location);
    },
    { failed: 'The restore failed' },
  );

  return (
    <section aria-labelledby="backups-title">
      <h2 id="backups-title">Backups</h2>
      <DataTable
        label="Backups, newest first"
        columns={['Description', 'Status', 'Taken', ACTIONS]}
        rows={props.backups}
        rowKey={(b) => b.id}
        empty="No backup yet."
        cells={(b) => (
          <>
            <td>{b.description}</td>
            <td data-testid="backup-status">{b.status}</td>
            <td>{new Date(b.create_time).toLocaleString()}</td>
            <td>
              {b.status === 'completed' && (
                <button
                  type="button"
                  class="secondary"
                  disabled={runRestore.busy}
                  aria-label={`Restore the backup ${b.description}`}
                  onClick={() => setRestoring(b)}
                >
                  Restore
                </button>
              )}
            </td>
          </>
        )}
      />
      {restoring && (
        <Confirm
          title="Restore this backup?"
          confirm={`Overwrite ${props.install.name}`}
          onConfirm={() => runRestore.run(restoring)}
          onCancel={() => setRestoring(null)}
        >
          <p data-testid="restore-warning">
            The files and the database of the install <strong>{props.install.name}</strong> (
            {props.install.environment ?? 'no environment'}) will be overwritten with the backup “
            {restoring.description}” taken {new Date(restoring.create_time).toLocaleString()}. Changes made
            since then are lost.
          </p>
        </Confirm>
      )}
      {runRestore.message && <Alert>{runRestore.message}</Alert>}
      <OperationStatus label="Restore" operation={restore.operation} testId="restore-status" />
      <form onSubmit={take.submit} aria-label="Take a backup" noValidate>
        {take.message && <Alert>{take.message}</Alert>}
        <Field
          label="Description"
          name="description"
          value={description}
          onInput={setDescription}
          error={take.errors.description}
        />
        <ListField
          label="Notify (email addresses)"
          name="notification_emails"
          value={emails}
          onInput={setEmails}
          note="also told when a restore ends."
          error={take.errors.notification_emails ?? runRestore.errors.notification_emails}
        />
        <button type="submit" disabled={take.busy}>
          {take.busy ? 'Backing up…' : 'Take a backup'}
        </button>
      </form>
      <OperationStatus label="Backup" operation={backup.operation} />
    </section>
  );
}

const describeInstall = (i: { name: string; environment: string | null }) =>
  `${i.name} (${i.environment ?? 'no environment'})`;

function CopyInstall(props: { install: Install; destinations: Sibling[] }) {
  const [destination, setDestination] = useState(props.destinations[0]?.id ?? '');
  const [confirming, setConfirming] = useState(false);
  const copy = useOperation();
  const target = props.destinations.find((d) => d.id === destination);
  const run = useSubmit(
    async (api: Api) => {
      setConfirming(false);
      const started = await api.run(() =>
        api.client.post('/v1/install_copy', {
          body: { source_environment_id: props.install.id, destination_environment_id: destination },
        }),
      );
      if (started.location) await copy.follow(api, started.location);
    },
    { failed: 'The copy failed' },
  );
  return (
    <section aria-labelledby="copy-title">
      <h2 id="copy-title">Copy to another environment</h2>
      {props.destinations.length === 0 ? (
        <p>This account has no other install to copy to.</p>
      ) : (
        <form
          aria-label="Copy to another environment"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            setConfirming(true);
          }}
        >
          {run.message && <Alert>{run.message}</Alert>}
          <Select
            label="Destination install"
            name="destination_environment_id"
            value={destination}
            onChange={setDestination}
            options={props.destinations.map((d) => ({ value: d.id, label: describeInstall(d) }))}
            error={run.errors.destination_environment_id}
          />
          <button type="submit" disabled={run.busy || !target}>
            {run.busy ? 'Copying…' : 'Copy…'}
          </button>
        </form>
      )}
      {confirming && target && (
        <Confirm
          title="Copy this install?"
          confirm={`Overwrite ${target.name}`}
          onConfirm={() => run.submit()}
          onCancel={() => setConfirming(false)}
        >
          <p data-testid="copy-warning">
            The files and the database of <strong>{describeInstall(target)}</strong> will be overwritten with
            those of {describeInstall(props.install)}.
          </p>
        </Confirm>
      )}
      <OperationStatus label="Copy" operation={copy.operation} testId="copy-status" />
    </section>
  );
}

function PurgeCache(props: { installId: string }) {
  const [type, setType] = useState<'object' | 'page' | 'cdn'>('page');
  const purge = useOperation();
  const run = useSubmit(
    async (api) => {
      const started = await api.run(() =>
        api.client.post('/v1/installs/{install_id}/purge_cache', {
          params: { path: { install_id: props.installId } },
          body: { type },
        }),
      );
      if (started.location) await purge.follow(api, started.location);
    },
    { failed: 'The purge failed' },
  );
  return (
    <section aria-labelledby="purge-title">
      <h2 id="purge-title">Cache</h2>
      <form onSubmit={run.submit} aria-label="Purge the cache" noValidate>
        {run.message && <Alert>{run.message}</Alert>}
        <Select
          label="Cache to purge"
          name="type"
          value={type}
          onChange={(v) => setType(v as typeof type)}
          options={[
            { value: 'page', label: 'Page cache' },
            { value: 'object', label: 'Object cache' },
            { value: 'cdn', label: 'CDN' },
          ]}
          error={run.errors.type}
        />
        <button type="submit" disabled={run.busy}>
          {run.busy ? 'Purging…' : 'Purge'}
        </button>
      </form>
      <OperationStatus label="Purge" operation={purge.operation} testId="purge-status" />
    </section>
  );
}

function DiskUsage(props: { installId: string; usage: Usage; reload: () => Promise<void> }) {
  const refresh = useOperation();
  const run = useSubmit(
    async (api) => {
      const started = await api.run(() =>
        api.client.post('/v1/installs/{install_id}/usage/refresh_disk_usage', {
          params: { path: { install_id: props.installId } },
        }),
      );
      if (started.location) await refresh.follow(api, started.location);
      await props.reload();
    },
    { failed: 'The disk usage refresh failed' },
  );
  const rollup = props.usage.metrics_rollup;
  return (
    <section aria-labelledby="disk-title">
      <h2 id="disk-title">Disk usage</h2>
      <dl class="facts" data-testid="disk-usage">
        <dt>Files</dt>
        <dd>{formatBytes(rollup.storage_file_bytes.latest?.value)}</dd>
        <dt>Database</dt>
        <dd>{formatBytes(rollup.storage_database_bytes.latest?.value)}</dd>
        <dt>Measured</dt>
        <dd>
          {props.usage.storage_update_time
            ? new Date(props.usage.storage_update_time).toLocaleString()
            : 'not yet'}
        </dd>
      </dl>
      {run.message && <Alert>{run.message}</Alert>}
      <button type="button" onClick={() => run.submit()} disabled={run.busy}>
        {run.busy ? 'Measuring…' : 'Refresh disk usage'}
      </button>
      <OperationStatus label="Disk usage" operation={refresh.operation} testId="disk-status" />
    </section>
  );
}
