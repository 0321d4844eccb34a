import { useState } from 'preact/hooks';
import { fieldErrorsOf, useApi } from '../api.js';
import { href, navigate } from '../router.js';
import { Alert, Field } from '../ui.js';

/** POST /v1/sites; the API's own field errors are shown beside their fields. */
export function NewSitePage(props: { accountId: string }) {
  const api = useApi();
  const [name, setName] = useState('');
  const [group, setGroup] = useState('');
  const [tags, setTags] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErrors({});
    setMessage(null);
    try {
      const tagList = tags
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean);
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
    } catch (err) {
      const { fields, message: text } = fieldErrorsOf(err);
      setErrors(fields);
      setMessage(Object.keys(fields).length > 0 ? 'The site was not created: see the fields below.' : text);
    } finally {
      setBusy(false);
    }
  };

  const tagError = Object.entries(errors).find(([field]) => field.startsWith('tags'))?.[1];
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
        <Field
          label="Tags (optional)"
          name="tags"
          value={tags}
          onInput={setTags}
          hint="Separated by commas."
          error={tagError}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create site'}
        </button>
      </form>
    </section>
  );
}
