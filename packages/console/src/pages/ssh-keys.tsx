import type { paths } from '@hostplane/client';
import { useCallback, useEffect, useId, useState } from 'preact/hooks';
import { messageOf, useApi, useSubmit } from '../api.js';
import { ACTIONS, Alert, Confirm, DataTable, Loading } from '../ui.js';

type SshKey =
  paths['/v1/ssh_keys']['get']['responses'][200]['content']['application/json']['results'][number];

/** The SSH keys of the signed-in user: list, add (a public key), delete (after a confirmation). */
export function SshKeysPage() {
  const api = useApi();
  const [keys, setKeys] = useState<SshKey[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(
    () => api.client.listAll((page) => api.client.get('/v1/ssh_keys', { params: { query: page } })),
    [api],
  );
  useEffect(() => {
    api.run(load).then(setKeys, (e) => setError(messageOf(e)));
  }, [api]);
  const reload = () => api.run(load).then(setKeys);

  const [publicKey, setPublicKey] = useState('');
  const add = useSubmit(
    async (a) => {
      await a.run(() => a.client.post('/v1/ssh_keys', { body: { public_key: publicKey.trim() } }));
      setPublicKey('');
      await reload();
    },
    { summary: 'The key was not added: see the field below.' },
  );
  const [deleting, setDeleting] = useState<SshKey | null>(null);
  const remove = useSubmit(async (a, key: SshKey) => {
    setDeleting(null);
    await a.run(() =>
      a.client.delete('/v1/ssh_keys/{ssh_key_id}', { params: { path: { ssh_key_id: key.uuid } } }),
    );
    await reload();
  });
  const id = useId();

  return (
    <section>
      <h1>SSH keys</h1>
      {error && <Alert>{error}</Alert>}
      {remove.message && <Alert>{remove.message}</Alert>}
      {!keys && !error && <Loading />}
      {keys && (
        <DataTable
          label="Your SSH keys"
          testId="ssh-keys"
          columns={['Comment', 'Fingerprint', 'Added', ACTIONS]}
          rows={keys}
          rowKey={(k) => k.uuid}
          empty="No SSH key yet."
          cells={(k) => (
            <>
              <td>{k.comment || '—'}</td>
              <td>
                <code>{k.fingerprint}</code>
              </td>
              <td>{new Date(k.created_at).toLocaleDateString()}</td>
              <td>
                <button
                  type="button"
                  class="secondary"
                  aria-label={`Delete the key ${k.comment || k.fingerprint}`}
                  onClick={() => setDeleting(k)}
                >
                  Delete
                </button>
              </td>
            </>
          )}
        />
      )}
      {deleting && (
        <Confirm
          title="Delete this SSH key?"
          confirm="Delete the key"
          onConfirm={() => remove.run(deleting)}
          onCancel={() => setDeleting(null)}
        >
          <p>
            The key {deleting.comment || ''} <code>{deleting.fingerprint}</code> will no longer sign in.
          </p>
        </Confirm>
      )}
      <form onSubmit={add.submit} aria-label="Add an SSH key" noValidate>
        <h2>Add a key</h2>
        {add.message && <Alert>{add.message}</Alert>}
        <div class="field">
          <label for={id}>Public key</label>
          <textarea
            id={id}
            name="public_key"
            value={publicKey}
            aria-invalid={add.errors.public_key ? 'true' : undefined}
            aria-describedby={`${id}-hint${add.errors.public_key ? ` ${id}-error` : ''}`}
            onInput={(e) => setPublicKey((e.currentTarget as HTMLTextAreaElement).value)}
          />
          <p class="hint" id={`${id}-hint`}>
            One line, for example the content of ~/.ssh/id_ed25519.pub
          </p>
          {add.errors.public_key && (
            <p class="field-error" id={`${id}-error`} data-field="public_key">
              {add.errors.public_key}
            </p>
          )}
        </div>
        <button type="submit" disabled={add.busy}>
          {add.busy ? 'Adding…' : 'Add the key'}
        </button>
      </form>
    </section>
  );
}
