// The job list, newest first (the server's order). Live from GET /api/events: a stage or progress event patches its
// card in place; a job queued, started or ended anywhere refreshes the list (positions and ETAs move). A poll every
// 30 s stays as a safety net; while the event stream is down the poll takes over, every second while a job is
// queued or running, every 5 s otherwise.

import type { Api } from '../api';
import { h, replace } from '../dom';
import type { Job } from '../types';
import { CardActions, JobCard } from './card';

const PAGE = 30;

export class JobList {
  readonly el: HTMLElement;
  private readonly items = h('div', { class: 'job-items', 'aria-live': 'polite' });
  private readonly footer = h('div', { class: 'job-footer' });
  private readonly count = h('span', { class: 'muted' });
  private readonly cards = new Map<string, JobCard>();
  private limit = PAGE;
  private timer: number | undefined;
  private stopped = true;
  private polling = false;
  private again = false;
  private source: EventSource | null = null;
  /** The event stream is open: the poll only backs it up. */
  private live = false;
  private refreshTimer: number | undefined;
  /** Stage and progress deltas that arrived while a poll was in flight, per job: the poll's answer may have been
   * read before them, and rendering it alone would step a card back (seen on CI: "sampling" without its "Step 1 of 3",
   * then no event to mend it while the job waited). */
  private readonly sincePoll = new Map<string, Partial<Job>>();
  /** Which jobs were queued or running at the last poll, to tell the status line when that changes. */
  private activeKey = '';

  /** The latest live preview of each running job, by id (dropped once its card shows the job ended). */
  private readonly previews = new Map<string, { step: number; max: number; url: string }>();
  constructor(
    private readonly api: Api,
    private readonly act: Omit<CardActions, 'remove'>,
    private readonly onError: (err: unknown) => void,
    private readonly onActiveChange: () => void = () => {},
  ) {
    this.el = h('section', { id: 'jobs', 'aria-label': 'Jobs' }, h('div', { class: 'section-head' }, h('h2', null, 'Jobs'), this.count), this.items, this.footer);
    window.setInterval(() => this.cards.forEach((c) => c.tick()), 1000);
  }

  start(): void {
    this.stopped = false;
    this.listen();
    void this.poll();
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.timer);
    this.source?.close();
    this.source = null;
    this.live = false;
  }

  /** Follows every job's events; EventSource reconnects by itself (and resumes with Last-Event-ID). */
  private listen(): void {
    if (this.source || typeof EventSource === 'undefined') return;
    const es = new EventSource(this.api.streamUrl('/api/events'));
    this.source = es;
    es.onopen = () => (this.live = true);
    es.onerror = () => (this.live = false);
    for (const type of ['queued', 'running', 'done', 'failed']) es.addEventListener(type, () => this.refreshSoon());
    es.addEventListener('preview', (e) => this.onPreview(e as MessageEvent<string>));
    for (const type of ['stage', 'progress']) {
      es.addEventListener(type, (e) => {
        const delta = JSON.parse((e as MessageEvent<string>).data) as Partial<Job> & { id: string };
        if (this.polling) this.sincePoll.set(delta.id, { ...this.sincePoll.get(delta.id), ...delta });
        const card = this.cards.get(delta.id);
        if (card) card.update({ ...card.job, ...delta });
        else this.refreshSoon();
      });
    }
  }

  /** A live preview: the running job's card shows it (the step in the URL makes each one a new picture). Kept by job,
   * so a card the list draws after the event (a job posted elsewhere) shows it too. */
  private onPreview(e: MessageEvent<string>): void {
    const p = JSON.parse(e.data) as { id: string; step: number; max: number; url: string };
    this.previews.set(p.id, p);
    this.showPreview(p.id);
  }

  private showPreview(id: string): void {
    const p = this.previews.get(id);
    const card = this.cards.get(id);
    if (!p || !card) return;
    if (card.job.status === 'running') card.showPreview(this.api.streamUrl(`${p.url}?step=${p.step}`), p.step, p.max);
    else this.previews.delete(id);
  }

  /** One list refresh for a burst of events. */
  private refreshSoon(): void {
    window.clearTimeout(this.refreshTimer);
    this.refreshTimer = window.setTimeout(() => void this.poll(), 100);
  }

  /** A job just created: shown at once, then kept fresh by the poll. */
  add(job: Job): void {
    this.render([job, ...[...this.cards.values()].map((c) => c.job).filter((j) => j.id !== job.id)], null);
    void this.poll();
  }

  /** Polls now (and schedules the next poll). */
  async poll(): Promise<void> {
    if (this.polling) {
      this.again = true;
      return;
    }
    this.polling = true;
    this.again = false;
    this.sincePoll.clear();
    window.clearTimeout(this.timer);
    let active = false;
    try {
      const { body, headers } = await this.api.getWithHeaders<Job[]>(`/api/jobs?limit=${this.limit}`);
      const total = Number(headers.get('X-Total-Count') ?? body.length);
      this.render(body, total);
      this.reapplySincePoll();
      const live = body.filter((j) => j.status === 'queued' || j.status === 'running');
      active = live.length > 0;
      const key = live.map((j) => `${j.id}:${j.status}`).join(',');
      if (key !== this.activeKey) {
        this.activeKey = key;
        this.onActiveChange();
      }
    } catch (err) {
      this.onError(err);
    } finally {
      this.polling = false;
      this.sincePoll.clear();
    }
    if (!this.stopped) this.timer = window.setTimeout(() => void this.poll(), this.again ? 0 : this.live ? 30_000 : active ? 1000 : 5000);
  }

  /** Puts back on running cards what their events said while the poll was in flight. An event older than the poll's
   * answer is put back too; the newer event behind it is on its way and mends the card again, where a stale answer
   * would stay until the next poll (30 s while the stream is live). */
  private reapplySincePoll(): void {
    for (const [id, delta] of this.sincePoll) {
      const card = this.cards.get(id);
      if (card?.job.status === 'running') card.update({ ...card.job, ...delta });
    }
  }

  private render(jobs: Job[], total: number | null): void {
    const seen = new Set<string>();
    let prev: Element | null = null;
    for (const job of jobs) {
      seen.add(job.id);
      let card = this.cards.get(job.id);
      if (card) card.update(job);
      else {
        card = new JobCard(job, { ...this.act, remove: (j) => this.remove(j) });
        this.cards.set(job.id, card);
        this.showPreview(job.id);
      }
      // Keep DOM order = list order without moving nodes that are already in place (a playing video would stop).
      const want: Element | null = prev ? prev.nextElementSibling : this.items.firstElementChild;
      if (want !== card.el) (prev ? prev.after(card.el) : this.items.prepend(card.el));
      prev = card.el;
    }
    for (const [id, card] of this.cards) {
      if (!seen.has(id)) {
        card.el.remove();
        this.cards.delete(id);
      }
    }
    if (jobs.length === 0) replace(this.items, h('p', { class: 'empty muted' }, 'No jobs yet. Make one with the form.'));
    else this.items.querySelector('.empty')?.remove();
    if (total !== null) {
      this.count.textContent = total > jobs.length ? `newest ${jobs.length} of ${total}` : `${total}`;
      replace(this.footer, total > jobs.length ? h('button', { type: 'button', onclick: () => ((this.limit += PAGE), void this.poll()) }, 'Show older jobs') : null);
    }
  }

  private async remove(job: Job): Promise<void> {
    const answer = await this.api.delete<{ action: string }>(`/api/jobs/${encodeURIComponent(job.id)}`);
    if (answer.action === 'deleted') {
      this.cards.get(job.id)?.el.remove();
      this.cards.delete(job.id);
    }
    await this.poll();
  }
}
