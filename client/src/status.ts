// The status line: online, GPU, current job and queue (from /api/status and /api/health), and the weights of
// every profile (from /api/config).

import type { Api } from './api';
import { h, replace } from './dom';
import type { Config, Health, Status } from './types';

export class StatusLine {
  readonly el = h('div', { id: 'status', class: 'status-line', role: 'status' });
  private status: Status | null = null;
  private health: Health | null = null;
  private config: Config | null = null;
  private problem = '';
  private timers: number[] = [];

  constructor(private readonly api: Api) {}

  start(config: Config): void {
    this.config = config;
    this.stop();
    const every = (ms: number, fn: () => Promise<void>) => {
      void fn();
      this.timers.push(window.setInterval(() => void fn(), ms));
    };
    every(2000, async () => this.set(() => this.api.get<Status>('/api/status').then((s) => (this.status = s))));
    every(30_000, async () => this.set(() => this.api.get<Health>('/api/health').then((x) => (this.health = x))));
    every(30_000, async () => this.set(() => this.api.get<Config>('/api/config').then((c) => (this.config = c))));
  }

  /** Reloads /api/status now (the job list calls this when a job starts, ends or joins the queue). */
  refresh(): void {
    void this.set(() => this.api.get<Status>('/api/status').then((s) => (this.status = s)));
  }

  stop(): void {
    this.timers.forEach((t) => window.clearInterval(t));
    this.timers = [];
  }

  private async set(load: () => Promise<unknown>): Promise<void> {
    try {
      await load();
      this.problem = '';
    } catch (err) {
      this.problem = err instanceof Error ? err.message : String(err);
    }
    this.render();
  }

  private render(): void {
    const s = this.status;
    const gpu = this.health?.gpu;
    const parts: (Node | string)[] = [];
    const online = !!s?.online && !this.problem;
    parts.push(h('span', { class: `dot ${online ? 'on' : 'off'}`, 'aria-hidden': 'true' }), h('span', null, this.problem ? `offline: ${this.problem}` : s ? (s.online ? 'online' : 'backend offline') : '…'));
    if (gpu) parts.push(h('span', { 'data-role': 'gpu' }, gpu.available ? `GPU: ${gpu.name || gpu.vendor || 'unnamed'}${gpu.software ? ' (software)' : ''}` : `no GPU (${gpu.error ?? 'not found'})`));
    if (s) {
      parts.push(h('span', { 'data-role': 'queue' }, `${s.queued} queued`));
      parts.push(h('span', { 'data-role': 'current' }, s.current_job ? `running ${s.current_job}` : 'idle'));
    }
    if (this.config) parts.push(weights(this.config));
    replace(this.el, ...parts);
  }
}

/** "weights: 1 demo, 10 missing" with the per-profile list when opened. */
function weights(c: Config): HTMLElement {
  const all = [...c.profiles.map((p) => ({ name: p.profile, kind: p.kind, w: p.weights, note: p.note })), { name: c.tts.profile, kind: 'speech', w: c.tts.weights, note: c.tts.note }];
  const counts = (['real', 'demo', 'missing'] as const).map((w) => [w, all.filter((p) => p.w === w).length] as const).filter(([, n]) => n > 0);
  return h('details', { class: 'weights' },
    h('summary', null, `weights: ${counts.map(([w, n]) => `${n} ${w}`).join(', ')}`),
    h('ul', null, ...all.map((p) => h('li', { title: p.note ?? '' }, h('span', { class: `weights-tag ${p.w}` }, p.w), ` ${p.name} `, h('span', { class: 'muted' }, p.kind)))));
}
