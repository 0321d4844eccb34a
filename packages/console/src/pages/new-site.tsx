import { useState } from 'preact/hooks';
import { useSubmit } from '../api.js';
import { href, navigate } from '../router.js';
import { Alert, Field, ListField, splitList } from '../ui.js';

/** POST /v1/sites; the API's own field errors are shown beside their fields. */
export function NewSitePage(props: { accountId: string }) {
  const [name, setName] = useState('');
  const [group, setGroup] = useState('');
  const [tags, setTags] = useState('');
  const { submit, busy, errors, message } = useSubmit(
    async (api) => {
      const tagList = splitList(tags);
      await api.run(() =>
        api.client.post('/v1/sites', {
          body: {
            name,
            account_id: props.accountId,
            ...(group && { group_name: group }),
            ...(tagList.length > 0 && { tags: tagList }),
          },
        }),
      );
      navigate(href.account(props.accountId));
    },
    { summary: 'The site was not created: see the fields below.' },
  );

  return (
    <section class="narrow">
      <p class="crumbs">
        <a href={href.account(props.accountId)}>Sites</a>
      </p>
      <h1>New site</h1>
      {message && <Alert>{message}</Alert>}
      <form onSubmit={submit} aria-label="New site" noValidate>
        <Field label="Name" name="name" value={name} onInput={setName} error={errors.name} />
        <Field
          label="Group (optional)"
          name="group_name"
          value={group}
          onInput={setGroup}
          error={errors.group_name}
        />
        <ListField label="Tags (optional)" name="tags" value={tags} onInput={setTags} error={errors.tags} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create site'}
        </button>
      </form>
    </section>
  );
}
