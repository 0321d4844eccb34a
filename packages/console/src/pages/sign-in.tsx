import { createHostplaneClient, HostplaneError } from '@hostplane/client';
import { useState } from 'preact/hooks';
import type { Credential } from '../session.js';
import { Alert, Field } from '../ui.js';

/** Checks the credential with GET /v1/user before keeping it (in sessionStorage, by the app). */
export function SignInPage(props: { notice: string | null; onSignedIn: (c: Credential) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const client = createHostplaneClient({ baseUrl: location.origin, username, password });
      await client.get('/v1/user');
      props.onSignedIn({ username, password });
    } catch (err) {
      if (err instanceof HostplaneError && err.kind === 'unauthenticated')
        setError('That username and password were not accepted.');
      else if (err instanceof HostplaneError && err.kind === 'unavailable')
        setError('Hostplane is not answering right now: try again in a moment.');
      else setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="narrow">
      <h1>Sign in</h1>
      <p>Use an API credential of Hostplane (its username and password). It is kept in this tab only.</p>
      {props.notice && <Alert kind="info">{props.notice}</Alert>}
      {error && <Alert>{error}</Alert>}
      <form onSubmit={submit} aria-label="Sign in">
        <Field
          label="Username"
          name="username"
          value={username}
          onInput={setUsername}
          required
          autoComplete="username"
        />
        <Field
          label="Password"
          name="password"
          type="password"
          value={password}
          onInput={setPassword}
          required
          autoComplete="current-password"
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </section>
  );
}
