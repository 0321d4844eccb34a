import type { paths } from '@hostplane/client';
import { useEffect, useState } from 'preact/hooks';
import { messageOf, useApi } from '../api.js';
import { href } from '../router.js';
import { Alert, DataTable, Loading } from '../ui.js';

type Site = paths['/v1/sites']['get']['responses'][200]['content']['application/json']['results'][number];
type Install =
  paths['/v1/installs']['get']['responses'][200]['content']['application/json']['results'][number];

/** The sites of an account with their installs: three reads side by side (no waterfall). */
export function AccountPage(props: { accountId: string }) {
  const api = useApi();
  const [data, setData] = useState<{ name: string; sites: Site[]; installs: Map<string, Install> } | null>(
    null,
  );
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const { client } = api;
    const account_id = props.accountId;
    api
      .run(() =>
        Promise.all([
          client.get('/v1/accounts/{account_id}', { params: { path: { account_id } } }),
          client.listAll((page) => client.get('/v1/sites', { params: { query: { ...page, account_id } } })),
          client.listAll((page) =>
            client.get('/v1/installs', { params: { query: { ...page, account_id } } }),
          ),
        ]),
      )
      .then(
        ([account, sites, installs]) =>
          setData({ name: account.name, sites, installs: new Map(installs.map((i) => [i.id, i])) }),
        (e) => setError(messageOf(e)),
      );
  }, [api, props.accountId]);

  return (
    <section>
      <p class="crumbs">
        <a href={href.accounts()}>Accounts</a>
      </p>
      <h1>{data ? `Sites of ${data.name}` : 'Sites'}</h1>
      {error && <Alert>{error}</Alert>}
      {!data && !error && <Loading />}
      <ul class="subnav" aria-label="This account">
        <li>
          <a href={href.users(props.accountId)}>Users and invitations</a>
        </li>
        <li>
          <a href={href.usage(props.accountId)}>Usage</a>
        </li>
      </ul>
      <p>
        <a class="button" href={href.newSite(props.accountId)}>
          New site
        </a>
      </p>
      {data && data.sites.length === 0 && <p>No site yet.</p>}
      {data && (
        <ul class="cards">
          {data.sites.map((site) => (
            <li key={site.id}>
              <h2>
                <a href={href.site(site.id)}>{site.name}</a>
              </h2>
              {site.group_name && <p class="muted">Group: {site.group_name}</p>}
              <DataTable
                label={`Installs of ${site.name}`}
                columns={['Install', 'Environment', 'Status']}
                rows={site.installs}
                rowKey={(i) => i.id}
                empty="No install yet."
                scroll={false}
                cells={(i) => (
                  <>
                    <td>
                      <a href={href.install(i.id)}>{i.name}</a>
                    </td>
                    <td>{i.environment ?? '—'}</td>
                    <td>{data.installs.get(i.id)?.status ?? '—'}</td>
                  </>
                )}
              />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
