// The page: token, status line, the three forms (tabs) and the job list. Everything comes from the API.

import './style.css';
import { Api, ApiError, OfflineError } from './api';
import { $, h } from './dom';
import { ImageForm } from './forms/image-form';
import { SpeechForm } from './forms/speech-form';
import { VideoForm } from './forms/video-form';
import { JobList } from './jobs/list';
import { StatusLine } from './status';
import { TokenPanel } from './token';
import type { Config, Job } from './types';
import { Viewer } from './viewer';

const api = new Api(() => TokenPanel.stored(), () => unauthorized());
const token = new TokenPanel(() => void connect());
const status = new StatusLine(api);
const viewer = new Viewer();
const banner = h('p', { id: 'banner', class: 'banner', role: 'alert', hidden: true });
const create = h('section', { id: 'create', class: 'panel', 'aria-label': 'New job', hidden: true });
let list: JobList | null = null;
let forms: { video: VideoForm; image: ImageForm; speech: SpeechForm } | null = null;

function unauthorized(): void {
  list?.stop();
  status.stop();
  token.show('The service refused this token (401 bad token). Enter the token the service printed or stored in DATA_DIR/token.');
}

function problem(err: unknown): void {
  if (err instanceof ApiError && err.status === 401) return; // unauthorized() has said it
  banner.textContent = err instanceof OfflineError ? `${err.message}. Retrying…` : `The service answered: ${err instanceof Error ? err.message : String(err)}`;
  banner.hidden = false;
}

async function connect(): Promise<void> {
  if (!TokenPanel.stored()) return token.show();
  let cfg: Config;
  try {
    cfg = await api.get<Config>('/api/config');
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) {
      problem(err);
      window.setTimeout(() => void connect(), 5000);
    }
    return;
  }
  banner.hidden = true;
  token.hide();
  if (!forms) build(cfg);
  create.hidden = false;
  status.start(cfg);
  list!.start();
}

function build(cfg: Config): void {
  list = new JobList(api, { useAgain, open: (job) => viewer.open(job) }, problem, () => status.refresh());
  const added = (job: Job) => {
    list!.add(job);
    // one column (a phone): the list is below the whole form; bring the job just queued into view
    if (window.matchMedia('(max-width: 860px)').matches) window.requestAnimationFrame(() => document.getElementById(`job-${job.id}`)?.scrollIntoView({ behavior: 'smooth', block: 'nearest' }));
  };
  forms = { video: new VideoForm(api, cfg, added), image: new ImageForm(api, cfg, added), speech: new SpeechForm(api, cfg) };
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  for (const [name, form] of Object.entries(forms) as [keyof typeof forms, { view: { form: HTMLFormElement } }][]) {
    const tab = h('button', { type: 'button', role: 'tab', id: `tab-${name}`, 'aria-controls': form.view.form.id, onclick: () => showTab(name) }, name[0].toUpperCase() + name.slice(1));
    tabs.appendChild(tab);
    form.view.form.setAttribute('role', 'tabpanel');
    form.view.form.setAttribute('aria-labelledby', tab.id);
  }
  create.append(tabs, forms.video.view.form, forms.image.view.form, forms.speech.view.form);
  $('main').append(list.el);
  showTab((localStorage.getItem('kiln.tab') as 'video' | 'image' | 'speech') || 'video');
}

function showTab(name: 'video' | 'image' | 'speech'): void {
  if (!forms) return;
  localStorage.setItem('kiln.tab', name);
  for (const [n, f] of Object.entries(forms)) {
    f.view.form.hidden = n !== name;
    $(`#tab-${n}`).setAttribute('aria-selected', String(n === name));
  }
}

function useAgain(job: Job): void {
  if (!forms) return;
  showTab(job.kind);
  forms[job.kind].fill(job);
  create.scrollIntoView({ behavior: 'smooth', block: 'start' });
}

document.body.append(
  h('header', { class: 'top' },
    h('h1', null, 'Kiln'),
    status.el,
    h('button', { type: 'button', class: 'token-toggle', onclick: () => token.toggle() }, 'Token')),
  banner,
  token.el,
  h('main', null, create),
  viewer.el,
);
token.hide();
void connect();
