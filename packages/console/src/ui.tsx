import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';

/** A labelled input with the API's error for it beside it (aria-describedby, aria-invalid). */
export function Field(props: {
  label: string;
  name: string;
  value: string;
  onInput: (value: string) => void;
  error?: string | undefined;
  hint?: string;
  type?: 'text' | 'password';
  required?: boolean;
  autoComplete?: string;
}) {
  const id = useId();
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const described = [props.hint && hintId, props.error && errorId].filter(Boolean).join(' ');
  const attributes = {
    id,
    name: props.name,
    value: props.value,
    required: props.required,
    autoComplete: props.autoComplete,
    'aria-invalid': props.error ? ('true' as const) : undefined,
    'aria-describedby': described || undefined,
    onInput: (e: Event) => props.onInput((e.currentTarget as HTMLInputElement).value),
  };
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.type === 'password' ? (
        <input type="password" {...attributes} />
      ) : (
        <input type="text" {...attributes} />
      )}
      {props.hint && (
        <p class="hint" id={hintId}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={errorId} data-field={props.name}>
          {props.error}
        </p>
      )}
    </div>
  );
}

export function Alert(props: { children: ComponentChildren; kind?: 'error' | 'info' }) {
  return (
    <p class={`alert ${props.kind ?? 'error'}`} role={props.kind === 'info' ? 'status' : 'alert'}>
      {props.children}
    </p>
  );
}

export function Loading() {
  return (
    <p class="loading" role="status">
      Loading…
    </p>
  );
}
