// A full-size view of an image result, over the page (Escape or the button closes it).

import { h, replace } from './dom';
import type { Job } from './types';

export class Viewer {
  readonly el: HTMLDialogElement;
  private readonly body = h('div', { class: 'viewer-body' });

  constructor() {
    const close = h('button', { type: 'button', class: 'viewer-close', 'aria-label': 'Close', onclick: () => this.el.close() }, 'Close');
    this.el = h('dialog', { id: 'viewer', 'aria-label': 'Result' }, h('div', { class: 'viewer-bar' }, close), this.body);
    // A click on the backdrop (outside the content) closes too.
    this.el.addEventListener('click', (ev) => ev.target === this.el && this.el.close());
    this.el.addEventListener('close', () => replace(this.body));
  }

  open(job: Job): void {
    const src = job.image ?? job.video;
    if (!src) return;
    const name = src.split('/').pop()!;
    const media = job.kind === 'image' ? h('img', { src, alt: `result of job ${job.id}` }) : h('video', { src, controls: true, autoplay: true, playsinline: true });
    replace(this.body, media, h('p', { class: 'viewer-caption' }, h('span', null, `${job.id} · ${job.size}`), ' ', h('a', { href: src, download: name }, `Download ${name}`)));
    this.el.showModal();
  }
}
