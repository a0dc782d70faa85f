// One job in the list: live status, result, error, parameters and actions. Updated in place on each poll, so a
// playing video or an open parameters panel survives the refresh.

import { h, replace } from '../dom';
import { duration, stage, when } from '../format';
import type { Job } from '../types';

export interface CardActions {
  useAgain(job: Job): void;
  /** DELETE /api/jobs/{id}; resolves when the server has answered. */
  remove(job: Job): Promise<void>;
  open(job: Job): void;
}

const ACTION: Record<Job['status'], { label: string; question: string; yes: string }> = {
  queued: { label: 'Cancel', question: 'Cancel this queued job?', yes: 'Yes, cancel' },
  running: { label: 'Interrupt', question: 'Stop this running job? Its partial output is discarded.', yes: 'Yes, interrupt' },
  done: { label: 'Delete', question: 'Delete this job and its file?', yes: 'Yes, delete' },
  failed: { label: 'Delete', question: 'Delete this failed job?', yes: 'Yes, delete' },
};

export class JobCard {
  readonly el: HTMLElement;
  private readonly head = h('header', { class: 'job-head' });
  private readonly prompt = h('p', { class: 'job-prompt' });
  private readonly live = h('div', { class: 'job-live' });
  /** The running job's latest live preview (its events announce each; README "Live previews"). */
  private readonly preview = h('img', { class: 'job-preview', alt: '', hidden: true });
  private readonly result = h('div', { class: 'job-result' });
  private readonly error = h('p', { class: 'job-error', role: 'status', hidden: true });
  private readonly params = h('dl', { class: 'params' });
  private readonly actions = h('div', { class: 'job-actions' });
  private json = '';
  private shownOutput = '';
  private actionsFor = '';
  /** Elapsed time base for the ticking clock: server elapsed at local time `at`. */
  private clock: { base: number; at: number } | null = null;

  constructor(public job: Job, private readonly act: CardActions) {
    this.el = h('article', { class: 'job', id: `job-${job.id}`, 'data-job-id': job.id },
      this.head, this.prompt, this.live, this.preview, this.result, this.error,
      h('details', { class: 'job-params' }, h('summary', null, 'Parameters'), this.params),
      this.actions);
    this.update(job);
  }

  update(job: Job): void {
    const json = JSON.stringify(job);
    if (json === this.json) return;
    this.json = json;
    this.job = job;
    this.el.dataset.status = job.status;
    replace(this.head,
      h('span', { class: `kind ${job.kind}` }, job.kind),
      h('span', { class: `badge ${job.status}`, 'data-role': 'status' }, job.status),
      h('span', { class: 'job-id' }, job.id),
      h('time', { datetime: new Date(job.created * 1000).toISOString() }, when(job.created)));
    this.prompt.textContent = job.prompt;
    this.prompt.title = job.prompt;
    this.renderLive();
    if (job.status !== 'running' && !this.preview.hidden) {
      this.preview.hidden = true;
      this.preview.removeAttribute('src');
    }
    this.renderResult();
    this.error.hidden = job.status !== 'failed';
    this.error.textContent = job.status === 'failed' ? failure(job.error) : '';
    this.renderParams();
    if (this.actionsFor !== job.status) this.renderActions();
  }

  /** Shows a live preview of the running job (`src` carries the token: an img cannot send a header). */
  showPreview(src: string, step: number, max: number): void {
    if (this.job.status !== 'running') return;
    this.preview.src = src;
    this.preview.alt = `preview of job ${this.job.id} after step ${step} of ${max}`;
    this.preview.hidden = false;
  }

  /** Once a second: the running job's elapsed time, the queued job's waiting time. */
  tick(): void {
    const el = this.live.querySelector<HTMLElement>('[data-role="elapsed"]');
    if (!el) return;
    if (this.job.status === 'running' && this.clock) el.textContent = duration(this.clock.base + (performance.now() - this.clock.at) / 1000);
    if (this.job.status === 'queued') el.textContent = duration(Date.now() / 1000 - this.job.created);
  }

  private renderLive(): void {
    const j = this.job;
    if (j.status === 'queued') {
      this.clock = null;
      replace(this.live, h('span', null, j.position ? `Position ${j.position} in the queue` : 'Queued'), ' · waiting ', h('span', { 'data-role': 'elapsed' }, duration(Date.now() / 1000 - j.created)), eta(j));
    } else if (j.status === 'running') {
      this.clock = { base: j.elapsed ?? 0, at: performance.now() };
      const p = j.progress;
      const pct = p && p.max > 0 ? Math.round((100 * p.value) / p.max) : null;
      const bar = h('div', { class: `bar${pct === null ? ' indeterminate' : ''}`, role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': p?.max ?? 0, 'aria-valuenow': p?.value ?? 0 }, h('div', { style: `width:${pct ?? 100}%` }));
      replace(this.live, bar, h('div', { class: 'live-text' },
        h('span', { 'data-role': 'stage', 'data-stage': j.stage ?? '', title: j.stage ? `stage ${j.stage}` : '' }, p ? `Step ${p.value} of ${p.max} · ${stage(j.stage)}` : stage(j.stage)),
        h('span', null, h('span', { 'data-role': 'elapsed' }, duration(j.elapsed ?? 0)), eta(j))));
    } else if (j.status === 'done') {
      this.clock = null;
      replace(this.live, h('span', { class: 'muted' }, `Made in ${duration(j.exec_s ?? 0)}${j.finished ? `, finished ${when(j.finished)}` : ''}`));
    } else {
      this.clock = null;
      replace(this.live);
    }
  }

  private renderResult(): void {
    const j = this.job;
    const out = j.status === 'done' ? (j.image ?? j.video ?? '') : '';
    if (out === this.shownOutput) return;
    this.shownOutput = out;
    if (!out) return replace(this.result);
    const name = out.split('/').pop()!;
    const media = j.kind === 'image'
      ? h('button', { type: 'button', class: 'thumb', title: 'Open the full image', onclick: () => this.act.open(j) }, h('img', { src: out, alt: `result of job ${j.id}`, loading: 'lazy' }))
      : h('video', { src: out, controls: true, preload: 'metadata', playsinline: true });
    replace(this.result, media, h('div', { class: 'result-links' },
      h('a', { href: out, download: name, class: 'download' }, `Download ${name}`),
      j.kind === 'image' ? h('a', { href: out, target: '_blank', rel: 'noopener' }, 'Open in a new tab') : null));
  }

  private renderParams(): void {
    const j = this.job;
    const rows: [string, string | number | boolean | undefined][] = [
      ['mode', j.mode], ['profile', j.profile], ['aspect', j.aspect], ['res', j.res], ['size', j.size],
      ['seconds', j.seconds !== undefined ? `${j.seconds} (${j.frames} frames)` : undefined],
      ['seed', j.seed], ['steps', j.steps], ['cfg', j.cfg], ['negative', j.negative || undefined],
      ['size_from_ref', j.kind === 'image' ? j.size_from_ref : undefined], ['images', j.image_count],
      ['exec_s', j.exec_s], ['callback_status', j.callback_status],
    ];
    replace(this.params, ...rows.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h('dt', null, k), h('dd', null, String(v))]));
  }

  private renderActions(): void {
    this.actionsFor = this.job.status;
    const a = ACTION[this.job.status];
    const again = h('button', { type: 'button', onclick: () => this.act.useAgain(this.job) }, 'Use these settings again');
    const danger = h('button', { type: 'button', class: 'danger', onclick: () => this.confirm() }, a.label);
    replace(this.actions, again, danger);
  }

  /** Inline confirmation (works the same on a phone as on a desktop; no blocking dialog). */
  private confirm(): void {
    const a = ACTION[this.job.status];
    const msg = h('span', { class: 'confirm-text' }, a.question);
    const yes = h('button', { type: 'button', class: 'danger', 'data-role': 'confirm' }, a.yes);
    const no = h('button', { type: 'button', onclick: () => this.renderActions() }, 'Keep');
    yes.addEventListener('click', async () => {
      yes.disabled = no.disabled = true;
      try {
        await this.act.remove(this.job);
      } catch (err) {
        replace(msg, `Could not ${a.label.toLowerCase()}: ${err instanceof Error ? err.message : String(err)}`);
        yes.disabled = no.disabled = false;
        return;
      }
      this.renderActions();
    });
    replace(this.actions, h('div', { class: 'confirm', role: 'group' }, msg, yes, no));
  }
}

function failure(error: string | undefined): string {
  if (error === 'cancelled') return 'Cancelled before it ran.';
  if (error === 'interrupted') return 'Interrupted while running; partial output removed.';
  return `Failed: ${error ?? 'no reason given'}`;
}

/** " · about 40 s left" from the server's eta_s (queued and running jobs), or nothing. */
function eta(j: Job): string {
  if (j.eta_s === undefined) return '';
  return ` · about ${duration(Math.max(1, Math.round(j.eta_s)))} ${j.status === 'queued' ? 'until done' : 'left'}`;
}
