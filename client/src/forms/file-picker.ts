// A file field that keeps its own list (add files one at a time, remove any), previews each file, and says
// the limits before submit: how many, how large, how long.

import { h, replace } from '../dom';
import { bytes, duration } from '../format';

export interface PickerLimits {
  /** Most files (0 means the field takes none now, e.g. a profile that cannot take images). */
  maxCount: number;
  maxBytes?: number;
  /** Allowed clip length (audio). */
  seconds?: { min: number; max: number };
}

interface Picked {
  file: File;
  url: string;
  /** Audio duration or image size, once the browser has read it. */
  seconds?: number;
  width?: number;
  height?: number;
  unreadable?: boolean;
}

export class FilePicker {
  readonly el: HTMLElement;
  readonly input: HTMLInputElement;
  private readonly list: HTMLElement;
  private readonly limitsText: HTMLElement;
  private picked: Picked[] = [];
  private limits: PickerLimits = { maxCount: 1 };

  constructor(
    readonly name: string,
    private readonly media: 'image' | 'audio',
    private readonly describeLimits: (l: PickerLimits) => string,
    private readonly onChange: () => void = () => {},
  ) {
    this.input = h('input', {
      type: 'file',
      name: `${name}-picker`,
      accept: media === 'image' ? 'image/png,image/jpeg,image/webp,image/gif' : 'audio/*,video/mp4,.m4a,.mp3,.wav,.flac,.ogg,.opus',
      multiple: true,
      onchange: () => this.add([...(this.input.files ?? [])]),
    });
    this.limitsText = h('span', { class: 'limits' });
    this.list = h('ul', { class: `previews ${media}` });
    this.el = h('div', { class: 'picker' }, this.input, this.list);
  }

  /** The limits line (goes in the row's hint). */
  get limitsEl(): HTMLElement {
    return this.limitsText;
  }

  setLimits(l: PickerLimits): void {
    this.limits = l;
    this.input.multiple = l.maxCount > 1;
    this.input.disabled = l.maxCount === 0 && this.picked.length === 0;
    this.limitsText.textContent = this.describeLimits(l);
    this.render();
  }

  files(): File[] {
    return this.picked.map((p) => p.file);
  }

  clear(): void {
    this.picked.forEach((p) => URL.revokeObjectURL(p.url));
    this.picked = [];
    this.input.value = '';
    this.render();
    this.onChange();
  }

  /** What breaks the limits now (shown beside the field; the form is not sent while any remain). */
  problems(): string[] {
    const out: string[] = [];
    const { maxCount, maxBytes, seconds } = this.limits;
    const noun = this.media === 'image' ? 'image' : 'clip';
    if (this.picked.length > maxCount) {
      out.push(maxCount === 0 ? `this choice takes no ${noun}s; remove ${this.picked.length}` : `${this.picked.length} ${noun}s chosen; at most ${maxCount}`);
    }
    for (const p of this.picked) {
      if (maxBytes && p.file.size > maxBytes) out.push(`${p.file.name} is ${bytes(p.file.size)}; at most ${bytes(maxBytes)}`);
      if (seconds && p.seconds !== undefined && (p.seconds < seconds.min || p.seconds > seconds.max)) {
        out.push(`${p.file.name} is ${duration(p.seconds)} long; clips must be ${seconds.min} to ${seconds.max} s`);
      }
    }
    return out;
  }

  private add(files: File[]): void {
    const single = this.limits.maxCount <= 1 && !this.input.multiple;
    if (single) this.clear();
    for (const file of files) {
      const p: Picked = { file, url: URL.createObjectURL(file) };
      this.picked.push(p);
      this.measure(p);
    }
    this.input.value = '';
    this.render();
    this.onChange();
  }

  private remove(p: Picked): void {
    URL.revokeObjectURL(p.url);
    this.picked = this.picked.filter((x) => x !== p);
    this.input.disabled = this.limits.maxCount === 0 && this.picked.length === 0;
    this.render();
    this.onChange();
  }

  /** Reads the image size or clip length in the browser, then re-renders (limits can then be checked). */
  private measure(p: Picked): void {
    const done = () => {
      this.render();
      this.onChange();
    };
    if (this.media === 'image') {
      const img = new Image();
      img.onload = () => {
        p.width = img.naturalWidth;
        p.height = img.naturalHeight;
        done();
      };
      img.onerror = () => {
        p.unreadable = true;
        done();
      };
      img.src = p.url;
    } else {
      const audio = new Audio();
      audio.preload = 'metadata';
      audio.onloadedmetadata = () => {
        p.seconds = audio.duration;
        done();
      };
      audio.onerror = () => {
        p.unreadable = true;
        done();
      };
      audio.src = p.url;
    }
  }

  private render(): void {
    const items = this.picked.map((p, i) => {
      const facts = [bytes(p.file.size)];
      if (p.width) facts.unshift(`${p.width}×${p.height}`);
      if (p.seconds !== undefined && Number.isFinite(p.seconds)) facts.unshift(duration(p.seconds));
      if (p.unreadable) facts.push(this.media === 'image' ? 'the browser cannot show it' : 'the browser cannot play it; the server will check it');
      const preview = this.media === 'image' ? h('img', { src: p.url, alt: p.file.name }) : h('audio', { src: p.url, controls: true, preload: 'metadata' });
      const label = this.media === 'image' ? `${i + 1}. ` : `<Audio ${i + 1}> `;
      return h(
        'li',
        null,
        preview,
        h('div', { class: 'file-facts' }, h('span', { class: 'file-name' }, label, p.file.name), h('span', null, facts.join(' · '))),
        h('button', { type: 'button', class: 'icon', title: `remove ${p.file.name}`, 'aria-label': `remove ${p.file.name}`, onclick: () => this.remove(p) }, '×'),
      );
    });
    replace(this.list, ...items);
    this.list.hidden = items.length === 0;
  }
}
