// A form laid out as labelled rows, each with a hint and a place for the server's reason about that field.

import { ApiError, OfflineError } from '../api';
import { h, replace } from '../dom';
import { placeErrors } from '../field-errors';

export interface Row {
  name: string;
  el: HTMLElement;
  hint: HTMLElement;
  error: HTMLElement;
}

export class FormView {
  readonly form: HTMLFormElement;
  readonly body: HTMLElement;
  readonly formError: HTMLElement;
  readonly submit: HTMLButtonElement;
  readonly result: HTMLElement;
  /** Under the rows, with the submit button (the plan line goes here). */
  readonly actions: HTMLElement;
  private readonly rows = new Map<string, Row>();

  constructor(readonly id: string, submitLabel: string) {
    this.body = h('div', { class: 'rows' });
    this.formError = h('p', { class: 'form-error', role: 'alert', hidden: true, 'data-error-for': '' });
    this.submit = h('button', { type: 'submit', class: 'primary' }, submitLabel);
    this.result = h('div', { class: 'form-result' });
    this.actions = h('div', { class: 'actions' }, this.submit);
    this.form = h('form', { id, novalidate: true, class: 'job-form' }, this.body, this.formError, this.actions, this.result);
  }

  /** Adds a row for `control` (whose name attribute is `name`) labelled `label`. */
  row(name: string, label: string, control: HTMLElement, hint: string | Node = '', opts: { wide?: boolean; inline?: boolean } = {}): Row {
    const id = control.id || `${this.id}-${name}`;
    control.id = id;
    const hintEl = h('div', { class: 'hint', id: `${id}-hint` }, hint);
    const error = h('p', { class: 'field-error', role: 'alert', hidden: true, 'data-error-for': name, id: `${id}-error` });
    control.setAttribute('aria-describedby', `${id}-hint ${id}-error`);
    const labelEl = h('label', { for: id }, label);
    const el = opts.inline
      ? h('div', { class: 'row inline', 'data-field': name }, h('div', { class: 'check' }, control, labelEl), hintEl, error)
      : h('div', { class: `row${opts.wide ? ' wide' : ''}`, 'data-field': name }, labelEl, control, hintEl, error);
    this.body.appendChild(el);
    const row = { name, el, hint: hintEl, error };
    this.rows.set(name, row);
    return row;
  }

  /** A sub-heading between rows. */
  heading(text: string): void {
    this.body.appendChild(h('h3', { class: 'form-heading' }, text));
  }

  /** Groups rows (by name) side by side on wide screens. */
  group(...names: string[]): void {
    const rows = names.map((n) => this.rows.get(n)!.el);
    const box = h('div', { class: 'row-group' });
    rows[0].before(box);
    rows.forEach((r) => box.appendChild(r));
  }

  fields(): string[] {
    return [...this.rows.keys()];
  }

  clearErrors(): void {
    this.formError.hidden = true;
    this.formError.textContent = '';
    for (const r of this.rows.values()) {
      r.error.hidden = true;
      r.error.textContent = '';
      r.el.classList.remove('invalid');
    }
  }

  /** Shows `message` beside `field` (or at the form when null). */
  fieldError(field: string | null, message: string): void {
    const row = field ? this.rows.get(field) : undefined;
    const target = row ? row.error : this.formError;
    target.textContent = target.textContent ? `${target.textContent} ${message}` : message;
    target.hidden = false;
    row?.el.classList.add('invalid');
  }

  /** Shows a file picker's problems beside its row (clearing them when none); true when there are none. */
  showFileProblems(picker: { name: string; problems(): string[] }): boolean {
    const row = this.rows.get(picker.name)!;
    const problems = picker.problems();
    row.error.textContent = problems.join('; ');
    row.error.hidden = problems.length === 0;
    row.el.classList.toggle('invalid', problems.length > 0);
    return problems.length === 0;
  }

  /** A failed request: 400/422 reasons beside their fields, anything else at the form. */
  showError(err: unknown): void {
    if (err instanceof ApiError && (err.status === 400 || err.status === 422)) {
      const placed = placeErrors(err.status, err.detail, this.fields());
      for (const p of placed) this.fieldError(p.field, p.message);
      const first = placed.find((p) => p.field);
      if (first) this.rows.get(first.field!)?.el.scrollIntoView({ block: 'nearest' });
    } else if (err instanceof ApiError && err.status === 401) {
      this.fieldError(null, 'The token was refused (401). Enter the right token above.');
    } else if (err instanceof ApiError) {
      this.fieldError(null, `${err.message} (HTTP ${err.status})`);
    } else if (err instanceof OfflineError) {
      this.fieldError(null, err.message);
    } else {
      this.fieldError(null, err instanceof Error ? err.message : String(err));
    }
  }

  /** On submit (the browser never posts the form itself): clears the last errors, stops when `check` finds problems in
   * the chosen files (it shows them), else runs `send`. */
  onSubmit(check: () => boolean, send: () => Promise<void>): void {
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.clearErrors();
      if (!check()) return;
      void send();
    });
  }

  /** Runs `work` with the button disabled; errors are shown, not thrown. */
  async busy(label: string, work: () => Promise<void>): Promise<void> {
    const old = this.submit.textContent;
    this.submit.disabled = true;
    this.submit.textContent = label;
    try {
      await work();
    } catch (err) {
      this.showError(err);
    } finally {
      this.submit.disabled = false;
      this.submit.textContent = old;
    }
  }

  setResult(...nodes: (Node | string)[]): void {
    replace(this.result, ...nodes);
  }
}

/** Reads a control's value: '' for an empty field. */
export function val(form: HTMLFormElement, name: string): string {
  const el = form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null;
  if (!el) return '';
  if (el instanceof HTMLInputElement && el.type === 'checkbox') return el.checked ? 'true' : '';
  return el.value;
}

export function setVal(form: HTMLFormElement, name: string, value: string | number | boolean | undefined): void {
  const el = form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null;
  if (!el || value === undefined) return;
  if (el instanceof HTMLInputElement && el.type === 'checkbox') el.checked = value === true || value === 'true';
  else if (el instanceof HTMLSelectElement && ![...el.options].some((o) => o.value === String(value))) {
    el.appendChild(h('option', { value: String(value) }, String(value)));
    el.value = String(value);
  } else el.value = String(value);
  el.dispatchEvent(new Event('change', { bubbles: true }));
}

/** Appends the named text fields to `fd`, leaving out empty ones so the server applies its defaults. The
 * required text (prompt, text) is always sent, so an empty one gets the server's reason beside it. */
export function appendFields(fd: FormData, form: HTMLFormElement, names: string[], always: string[] = []): void {
  for (const n of names) {
    const v = val(form, n);
    if (v !== '' || always.includes(n)) fd.append(n, v);
  }
}

/** Said after "use these settings again": input files are not kept by the service, so they are not restored. */
export function loadedNote(job: { id: string; image_count: number }): string {
  const files = job.image_count === 1 ? 'Its input image is' : `Its ${job.image_count} input images are`;
  return `Settings of ${job.id} loaded.${job.image_count ? ` ${files} not kept by the service; the files chosen below are what will be sent.` : ''}`;
}

/** "Queued as <id>" with a link down to the job's card (on a phone the list is below the form). */
export function queuedNote(job: { id: string; position?: number }): HTMLElement {
  const link = h('a', { href: `#job-${job.id}`, onclick: (ev: Event) => {
    ev.preventDefault();
    document.getElementById(`job-${job.id}`)?.scrollIntoView({ behavior: 'smooth', block: 'start' });
  } }, job.id);
  return h('span', null, 'Queued as ', link, job.position ? `, position ${job.position}.` : '.');
}
