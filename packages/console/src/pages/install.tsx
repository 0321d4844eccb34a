import { type Operation, OperationFailedError, type paths } from '@hostplane/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { fieldErrorsOf, messageOf, useApi } from '../api.js';
import { href } from '../router.js';
import { Alert, Field, Loading } from '../ui.js';

type Json<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer T } } };
}
  ? T
  : never;
type Install = Json<'/v1/installs/{install_id}', 'get'>;
type Domain = Json<'/v1/installs/{install_id}/domains', 'get'> extends { results: (infer D)[] } ? D : never;
type Backup = Json<'/v1/installs/{install_id}/backups', 'get'> extends { results: (infer B)[] } ? B : never;

/** An install with its domains and backups: three reads side by side, then each part on its own. */
export function InstallPage(props: { installId: string }) {
  const api = useApi();
  const install_id = props.installId;
  const [install, setInstall] = useState<Install | null>(null);
  const [domains, setDomains] = useState<Domain[] | null>(null);
  const [backups, setBackups] = useState<Backup[] | null>(null);
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
  useEffect(() => {
    api
      .run(() =>
        Promise.all([
          api.client.get('/v1/installs/{install_id}', { params: path }),
          loadDomains(),
          loadBackups(),
        ]),
      )
      .then(
        ([i, d, b]) => {
          setInstall(i);
          setDomains(d);
          setBackups(b);
        },
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
      {domains && (
        <Domains
          installId={install_id}
          domains={domains}
          reload={() => api.run(loadDomains).then(setDomains)}
        />
      )}
      {backups && (
        <Backups
          installId={install_id}
          backups={backups}
          reload={() => api.run(loadBackups).then(setBackups)}
        />
      )}
    </section>
  );
}

function Domains(props: { installId: string; domains: Domain[]; reload: () => Promise<void> }) {
  const api = useApi();
  const [name, setName] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    setMessage(null);
    try {
      await api.run(() =>
        api.client.post('/v1/installs/{install_id}/domains', {
          params: { path: { install_id: props.installId } },
          body: { name },
        }),
      );
      setName('');
      await props.reload();
    } catch (err) {
      const { fields, message: text } = fieldErrorsOf(err);
      setErrors(fields);
      if (!fields.name) setMessage(text);
    } finally {
      setBusy(false);
    }
  };

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

function Backups(props: { installId: string; backups: Backup[]; reload: () => Promise<void> }) {
  const api = useApi();
  const [description, setDescription] = useState('');
  const [emails, setEmails] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [message, setMessage] = useState<string | null>(null);
  const [operation, setOperation] = useState<Operation | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    setMessage(null);
    setOperation(null);
    try {
      const notification_emails = emails
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const started = await api.run(() =>
        api.client.post('/v1/installs/{install_id}/backups', {
          params: { path: { install_id: props.installId } },
          body: { description, notification_emails },
        }),
      );
      await props.reload();
      const location = started.location;
      if (location) {
        // Polls the operation with back-off (the client doubles the delay up to 4 s), then the list.
        await api.run(() =>
          api.client.waitForOperation(location, {
            intervalMs: 300,
            maxIntervalMs: 4000,
            onProgress: setOperation,
          }),
        );
        await props.reload();
      }
      setDescription('');
    } catch (err) {
      if (err instanceof OperationFailedError) {
        setMessage(`The backup failed: ${err.message}`);
      } else {
        const { fields, message: text } = fieldErrorsOf(err);
        const emailError = Object.entries(fields).find(([f]) => f.startsWith('notification_emails'))?.[1];
        setErrors({ ...fields, ...(emailError && { notification_emails: emailError }) });
        if (Object.keys(fields).length === 0) setMessage(text);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="backups-title">
      <h2 id="backups-title">Backups</h2>
      {props.backups.length === 0 ? (
        <p>No backup yet.</p>
      ) : (
        <table>
          <caption class="sr-only">Backups, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Description</th>
              <th scope="col">Status</th>
              <th scope="col">Taken</th>
            </tr>
          </thead>
          <tbody>
            {props.backups.map((b) => (
              <tr key={b.id}>
                <td>{b.description}</td>
                <td data-testid="backup-status">{b.status}</td>
                <td>{new Date(b.create_time).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form onSubmit={submit} aria-label="Take a backup" noValidate>
        {message && <Alert>{message}</Alert>}
        <Field
          label="Description"
          name="description"
          value={description}
          onInput={setDescription}
          error={errors.description}
        />
        <Field
          label="Notify (email addresses)"
          name="notification_emails"
          value={emails}
          onInput={setEmails}
          hint="Separated by commas."
          error={errors.notification_emails}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Backing up…' : 'Take a backup'}
        </button>
      </form>
      <p role="status" aria-live="polite" data-testid="operation-status">
        {operation && `Backup operation: ${operation.status.replace('_', ' ')}`}
      </p>
    </section>
  );
}
