import type { Operation } from '@hostplane/client';
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';

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

/** The items of what a ListField holds: split at commas, trimmed, blanks dropped. */
export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * A Field for a comma-separated list (email addresses, tags), read with splitList; its hint says so,
 * followed by `note` when there is one.
 */
export function ListField(props: Omit<Parameters<typeof Field>[0], 'hint' | 'type'> & { note?: string }) {
  const { note, ...field } = props;
  return <Field {...field} hint={note ? `Separated by commas; ${note}` : 'Separated by commas.'} />;
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

/**
 * A labelled select with the API's error for it beside it. `hideLabel` keeps the label for screen
 * readers only (a select in a table row, under its column's header).
 */
export function Select(props: {
  label: string;
  name: string;
  value: string;
  options: { value: string; label: string }[];
  onChange: (value: string) => void;
  error?: string | undefined;
  hideLabel?: boolean;
}) {
  const id = useId();
  const errorId = `${id}-error`;
  return (
    <div class="field">
      <label for={id} class={props.hideLabel ? 'sr-only' : undefined}>
        {props.label}
      </label>
      <select
        id={id}
        name={props.name}
        value={props.value}
        aria-invalid={props.error ? 'true' : undefined}
        aria-describedby={props.error ? errorId : undefined}
        onChange={(e) => props.onChange((e.currentTarget as HTMLSelectElement).value)}
      >
        {props.options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
      {props.error && (
        <p class="field-error" id={errorId} data-field={props.name}>
          {props.error}
        </p>
      )}
    </div>
  );
}

/** What a followed operation is doing now, announced politely (role=status). */
export function OperationStatus(props: { label: string; operation: Operation | null; testId?: string }) {
  const op = props.operation;
  return (
    <p role="status" aria-live="polite" data-testid={props.testId ?? 'operation-status'}>
      {op && `${props.label} operation: ${op.status.replace('_', ' ')}`}
      {op && op.status !== 'completed' && op.status !== 'failed' && (
        <progress class="op-progress" aria-label={`${props.label} in progress`} />
      )}
    </p>
  );
}

/**
 * A confirmation in a modal <dialog> (focus moves into it, Escape cancels): `children` says what
 * happens; nothing is done until the confirm button is pressed.
 */
export function Confirm(props: {
  title: string;
  confirm: string;
  children: ComponentChildren;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onCancel={props.onCancel} class="confirm">
      <h2 id={titleId}>{props.title}</h2>
      {props.children}
      <div class="actions">
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** Bytes for people (binary units). */
export function formatBytes(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  let n = Number(value);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return `${u === 0 ? n : n.toFixed(1)} ${units[u]}`;
}

/**
 * A wide table's box: it scrolls sideways on a narrow screen instead of widening the page, and can
 * be focused to scroll it with the keyboard (axe: scrollable-region-focusable).
 */
export function TableScroll(props: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section class="table-scroll" tabIndex={0} aria-label={props.label}>
      {props.children}
    </section>
  );
}

/** A DataTable's column: its header, or `{ label, hidden: true }` for a header read by screen readers only (actions). */
export type Column = string | { label: string; hidden: true };

/** The column of a row's buttons: its header is for screen readers only. */
export const ACTIONS: Column = { label: 'Actions', hidden: true };

/**
 * A table of `rows` under a caption and `<th scope="col">` headers, inside a TableScroll unless
 * `scroll` is false; with no rows it keeps its headers and says `empty` in a single row.
 */
export function DataTable<Row>(props: {
  /** The caption (for screen readers; the heading above says it to the eye) and the scroll region's name. */
  label: string;
  columns: Column[];
  rows: readonly Row[];
  /** A row's cells: `<td>`s, or a `<th scope="row">` first. */
  cells: (row: Row) => ComponentChildren;
  /** The row's key for Preact; default: its position. */
  rowKey?: (row: Row) => string;
  /** What an empty table says, e.g. "No backup yet.". */
  empty: string;
  testId?: string;
  /** On a phone each row becomes a block (style.css `table.stack`); default false. */
  stack?: boolean;
  /** Inside a TableScroll; default true. */
  scroll?: boolean;
}) {
  const table = (
    <table data-testid={props.testId} class={props.stack ? 'stack' : undefined}>
      <caption class="sr-only">{props.label}</caption>
      <thead>
        <tr>
          {props.columns.map((c) =>
            typeof c === 'string' ? (
              <th scope="col" key={c}>
                {c}
              </th>
            ) : (
              <th scope="col" key={c.label}>
                <span class="sr-only">{c.label}</span>
              </th>
            ),
          )}
        </tr>
      </thead>
      <tbody>
        {props.rows.length === 0 ? (
          <tr>
            <td colSpan={props.columns.length} class="muted">
              {props.empty}
            </td>
          </tr>
        ) : (
          props.rows.map((row, i) => <tr key={props.rowKey ? props.rowKey(row) : i}>{props.cells(row)}</tr>)
        )}
      </tbody>
    </table>
  );
  return props.scroll === false ? table : <TableScroll label={props.label}>{table}</TableScroll>;
}
