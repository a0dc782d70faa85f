// The "Plan" line beside a form: the peak GPU memory of the job the form would make, and whether it fits the budget,
// asked of the service with "dry_run": true on the JSON create (README "Dry runs"). Asked a second after the form
// stops changing (a plan takes seconds: the service runs it in a child process, one at a time), again only when the
// values changed; a request still out when they change is dropped. Only while the form is shown.

import { ApiError, type Api } from '../api';
import { h } from '../dom';

/** What the line reads of a plan (the whole object: JobPlanDto in /openapi.json). */
export interface PlanAnswer {
  dry_run: true;
  peak_gpu_bytes: number;
  budget_bytes: number;
  fits: boolean;
  adapter: { id: string; name: string };
  predicted: { sampling_s?: number; basis?: string; none?: string };
  stages: { stage: string; peak_gpu_bytes: number }[];
  notes: string[];
}

const DEBOUNCE_MS = 1000;
const BUSY_RETRY_MS = 3000;

export const gib = (n: number) => `${(n / 2 ** 30).toFixed(1)} GiB`;

/** "peak 23.1 GiB of GPU memory, fits the 133.4 GiB budget (NVIDIA H200, assumed)". */
export function planText(p: PlanAnswer): string {
  const assumed = p.notes.some((n) => n.startsWith('adapter profile assumed'));
  const budget = p.fits ? `fits the ${gib(p.budget_bytes)} budget` : `over the ${gib(p.budget_bytes)} budget`;
  const time = p.predicted.sampling_s !== undefined ? `; sampling about ${Math.round(p.predicted.sampling_s)} s` : '';
  return `Plan: peak ${gib(p.peak_gpu_bytes)} of GPU memory, ${budget} (${p.adapter.name}${assumed ? ', assumed' : ''})${time}`;
}

export class PlanLine {
  readonly el: HTMLElement;
  private timer: number | undefined;
  private inFlight: AbortController | undefined;
  /** The values last planned (or being planned). */
  private planned: string | undefined;

  /** `body`: the JSON request of the form's current values, or why there is none to plan (shown as it is). */
  constructor(
    private readonly api: Api,
    private readonly form: HTMLFormElement,
    private readonly path: string,
    private readonly body: () => Promise<Record<string, unknown> | string>,
  ) {
    this.el = h('p', { class: 'plan-line', 'data-role': 'plan', 'aria-live': 'polite' }, 'Plan: …');
    form.addEventListener('input', () => this.schedule());
    form.addEventListener('change', () => this.schedule());
    // a tab shown again plans what it shows
    new MutationObserver(() => this.schedule()).observe(form, { attributes: true, attributeFilter: ['hidden'] });
    this.schedule();
  }

  /** Plans the form's values once they stop changing (the file pickers call it: they change no form control). */
  schedule(delayMs = DEBOUNCE_MS): void {
    window.clearTimeout(this.timer);
    if (this.form.hidden) return;
    this.timer = window.setTimeout(() => void this.run(), delayMs);
  }

  private show(text: string, state: 'none' | 'pending' | 'fits' | 'over' | 'error', title = ''): void {
    this.el.textContent = text;
    this.el.dataset.state = state;
    this.el.title = title;
  }

  private async run(): Promise<void> {
    if (this.form.hidden) return;
    const body = await this.body();
    if (typeof body === 'string') {
      this.inFlight?.abort();
      this.planned = undefined;
      return this.show(body, 'none');
    }
    const key = JSON.stringify(body);
    if (key === this.planned) return;
    this.inFlight?.abort();
    const ac = new AbortController();
    this.inFlight = ac;
    this.planned = key;
    this.show('Plan: working out the peak GPU memory…', 'pending');
    try {
      const p = await this.api.postJson<PlanAnswer>(this.path, { ...body, dry_run: true }, ac.signal);
      if (ac.signal.aborted) return;
      this.show(planText(p), p.fits ? 'fits' : 'over', [...p.stages.map((s) => `${s.stage}: ${gib(s.peak_gpu_bytes)}`), ...p.notes].join('\n'));
    } catch (err) {
      if (ac.signal.aborted) return;
      this.planned = undefined;
      if (err instanceof ApiError && err.status === 429) {
        this.show('Plan: the planner is busy; asking again…', 'pending');
        this.schedule(BUSY_RETRY_MS);
      } else if (err instanceof ApiError && (err.status === 400 || err.status === 422)) {
        const first = typeof err.detail === 'string' ? err.detail.split('\n')[0] : 'a field of the wrong type';
        this.show(`Plan: none for these values (${first})`, 'error');
      } else {
        this.show(`Plan: not available (${err instanceof Error ? err.message : String(err)})`, 'error');
      }
    } finally {
      if (this.inFlight === ac) this.inFlight = undefined;
    }
  }
}

const dataUrls = new WeakMap<File, Promise<string>>();

/** A chosen file as a data: URI (the JSON create takes inputs so), read once per file. */
export function dataUrl(file: File): Promise<string> {
  let p = dataUrls.get(file);
  if (!p) {
    p = new Promise<string>((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(String(r.result));
      r.onerror = () => reject(r.error ?? new Error(`${file.name} could not be read`));
      r.readAsDataURL(file);
    });
    dataUrls.set(file, p);
  }
  return p;
}

/** Files sent with a plan at most (together): their sizes count, and they travel as base64 on every plan. */
export const PLAN_FILES_MAX_BYTES = 32 * 2 ** 20;

/** The form's named values as JSON: numbers where the API takes numbers, booleans for checkboxes, empty ones left
 * out (the service applies its defaults). */
export function jsonFields(form: HTMLFormElement, names: string[], numeric: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const n of names) {
    const el = form.elements.namedItem(n) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null;
    if (!el) continue;
    if (el instanceof HTMLInputElement && el.type === 'checkbox') {
      if (el.checked) out[n] = true;
      continue;
    }
    if (el.value === '') continue;
    out[n] = numeric.includes(n) && el.value.trim() !== '' && Number.isFinite(Number(el.value)) ? Number(el.value) : el.value;
  }
  return out;
}
