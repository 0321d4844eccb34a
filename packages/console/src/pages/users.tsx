import type { paths } from '@hostplane/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { messageOf, useApi, useSubmit } from '../api.js';
import { href } from '../router.js';
import { ACTIONS, Alert, Confirm, DataTable, Field, Loading, Select } from '../ui.js';

type AccountUser =
  paths['/v1/accounts/{account_id}/account_users']['get']['responses'][200]['content']['application/json']['results'][number];
type Role = 'owner' | 'full' | 'full,billing' | 'partial' | 'partial,billing';

const ROLES: { value: Role; label: string }[] = [
  { value: 'full', label: 'Full' },
  { value: 'full,billing', label: 'Full, with billing' },
  { value: 'partial', label: 'Partial (chosen installs)' },
  { value: 'partial,billing', label: 'Partial, with billing' },
  { value: 'owner', label: 'Owner' },
];
const roleLabel = (roles: string) => ROLES.find((r) => r.value === roles)?.label ?? roles;

/** The people of an account, their roles, the invitations not yet accepted, and an invite form. */
export function UsersPage(props: { accountId: string }) {
  const api = useApi();
  const account_id = props.accountId;
  const [name, setName] = useState<string | null>(null);
  const [users, setUsers] = useState<AccountUser[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(
    () =>
      api.client.listAll((page) =>
        api.client.get('/v1/accounts/{account_id}/account_users', {
          params: { path: { account_id }, query: page },
        }),
      ),
    [api, account_id],
  );
  useEffect(() => {
    api
      .run(() =>
        Promise.all([
          api.client.get('/v1/accounts/{account_id}', { params: { path: { account_id } } }),
          load(),
        ]),
      )
      .then(
        ([account, list]) => {
          setName(account.name);
          setUsers(list);
        },
        (e) => setError(messageOf(e)),
      );
  }, [api, account_id]);
  const reload = () => api.run(load).then(setUsers);

  const [first, setFirst] = useState('');
  const [last, setLast] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('full');
  const [sent, setSent] = useState<string | null>(null);
  const invite = useSubmit(
    async (a) => {
      setSent(null);
      const { data } = await a.run(() =>
        a.client.post('/v1/accounts/{account_id}/account_users', {
          params: { path: { account_id } },
          body: { user: { account_id, first_name: first, last_name: last, email, roles: role } },
        }),
      );
      // A 201 with the member: the 200 of `?dry_run=true` (issue 22) is never asked for here.
      if ('account_user' in data) setSent(`Invitation sent to ${data.account_user.email}.`);
      setFirst('');
      setLast('');
      setEmail('');
      await reload();
    },
    { summary: 'Nobody was invited: see the fields below.' },
  );
  const [removing, setRemoving] = useState<AccountUser | null>(null);
  const remove = useSubmit(async (a, user: AccountUser) => {
    setRemoving(null);
    await a.run(() =>
      a.client.delete('/v1/accounts/{account_id}/account_users/{user_id}', {
        params: { path: { account_id, user_id: user.user_id } },
      }),
    );
    await reload();
  });

  const members = users?.filter((u) => u.invite_accepted) ?? [];
  const invitations = users?.filter((u) => !u.invite_accepted) ?? [];
  const table = (list: AccountUser[], caption: string, testId: string, empty: string, editRoles: boolean) => (
    <DataTable
      label={caption}
      testId={testId}
      stack
      columns={['Name', 'Email', 'Role', ACTIONS]}
      rows={list}
      rowKey={(u) => u.user_id}
      empty={empty}
      cells={(u) => (
        <>
          <td>
            {u.first_name} {u.last_name}
          </td>
          <td>{u.email}</td>
          <td>
            {editRoles ? <RoleForm accountId={account_id} user={u} onSaved={reload} /> : roleLabel(u.roles)}
            {u.installs && u.installs.length > 0 && (
              <span class="muted"> ({u.installs.map((i) => i.name).join(', ')})</span>
            )}
          </td>
          <td>
            {!u.last_owner && (
              <button
                type="button"
                class="secondary"
                aria-label={`Remove ${u.email}`}
                onClick={() => setRemoving(u)}
              >
                Remove
              </button>
            )}
          </td>
        </>
      )}
    />
  );

  return (
    <section>
      <p class="crumbs">
        <a href={href.accounts()}>Accounts</a> / <a href={href.account(account_id)}>Sites</a>
      </p>
      <h1>{name ? `Users of ${name}` : 'Users'}</h1>
      {error && <Alert>{error}</Alert>}
      {!users && !error && <Loading />}
      {remove.message && <Alert>{remove.message}</Alert>}
      {users && (
        <>
          <h2>Members</h2>
          {table(members, 'Members and their roles', 'members', 'No member yet.', true)}
          <h2>Invitations</h2>
          {table(invitations, 'Invitations not yet accepted', 'invitations', 'No invitation waiting.', false)}
        </>
      )}
      {removing && (
        <Confirm
          title={removing.invite_accepted ? 'Remove this member?' : 'Withdraw this invitation?'}
          confirm={`Remove ${removing.email}`}
          onConfirm={() => remove.run(removing)}
          onCancel={() => setRemoving(null)}
        >
          <p>
            {removing.email} loses access to this account
            {removing.invite_accepted ? '' : ' (the invitation stops working)'}.
          </p>
        </Confirm>
      )}
      <form onSubmit={invite.submit} aria-label="Invite a user" noValidate class="narrow">
        <h2>Invite a user</h2>
        {invite.message && <Alert>{invite.message}</Alert>}
        <Field
          label="First name"
          name="first_name"
          value={first}
          onInput={setFirst}
          error={invite.errors.first_name}
        />
        <Field
          label="Last name"
          name="last_name"
          value={last}
          onInput={setLast}
          error={invite.errors.last_name}
        />
        <Field label="Email" name="email" value={email} onInput={setEmail} error={invite.errors.email} />
        <Select
          label="Role"
          name="roles"
          value={role}
          onChange={(v) => setRole(v as Role)}
          options={ROLES}
          error={invite.errors.roles}
        />
        <button type="submit" disabled={invite.busy}>
          {invite.busy ? 'Inviting…' : 'Send the invitation'}
        </button>
        {sent && (
          <span role="status" class="muted">
            {' '}
            {sent}
          </span>
        )}
      </form>
    </section>
  );
}

/**
 * A member's role, changed in place (PATCH account_users): the API's refusal (the last owner keeps
 * the role; nobody grants more than they hold) beside the select.
 */
function RoleForm(props: { accountId: string; user: AccountUser; onSaved: () => Promise<unknown> }) {
  const { email, user_id } = props.user;
  const [role, setRole] = useState(props.user.roles);
  const [saved, setSaved] = useState(false);
  const save = useSubmit(async (a) => {
    setSaved(false);
    await a.run(() =>
      a.client.patch('/v1/accounts/{account_id}/account_users/{user_id}', {
        params: { path: { account_id: props.accountId, user_id } },
        body: { roles: role as Role },
      }),
    );
    await props.onSaved();
    setSaved(true);
  });
  const fieldError = save.errors.roles ?? save.errors.install_ids;
  const otherError = Object.keys(save.errors).length === 0 ? (save.message ?? undefined) : undefined;
  return (
    <form onSubmit={save.submit} aria-label={`Change the role of ${email}`} noValidate class="role-form">
      <Select
        label={`Role of ${email}`}
        hideLabel
        name="roles"
        value={role}
        onChange={(v) => {
          setSaved(false);
          setRole(v);
        }}
        options={ROLES}
        error={fieldError ?? otherError}
      />
      <button type="submit" class="secondary" disabled={save.busy} aria-label={`Save the role of ${email}`}>
        {save.busy ? 'Saving…' : 'Save'}
      </button>
      <span role="status" class="muted">
        {saved && ' Saved.'}
      </span>
    </form>
  );
}
