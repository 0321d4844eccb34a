import { useEffect, useState } from 'preact/hooks';
import { messageOf, useApi } from '../api.js';
import { href } from '../router.js';
import { Alert, Loading } from '../ui.js';

type Account = { id: string; name: string; nickname: string };

export function AccountsPage() {
  const api = useApi();
  const [accounts, setAccounts] = useState<Account[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api
      .run(() => api.client.listAll((page) => api.client.get('/v1/accounts', { params: { query: page } })))
      .then(setAccounts, (e) => setError(messageOf(e)));
  }, [api]);

  return (
    <section>
      <h1>Accounts</h1>
      {error && <Alert>{error}</Alert>}
      {!accounts && !error && <Loading />}
      {accounts && accounts.length === 0 && <p>This credential belongs to no account.</p>}
      {accounts && accounts.length > 0 && (
        <ul class="cards">
          {accounts.map((a) => (
            <li key={a.id}>
              <a href={href.account(a.id)}>{a.name}</a>
              <span class="muted"> {a.nickname}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
