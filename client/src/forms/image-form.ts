// Image job form: POST /api/images (multipart), every field of the spec's list.

import type { Api } from '../api';
import { h, select } from '../dom';
import { bytes } from '../format';
import type { Config, Job } from '../types';
import { FilePicker } from './file-picker';
import { appendFields, FormView, loadedNote, queuedNote, setVal, val } from './form-view';
import { dataUrl, jsonFields, PLAN_FILES_MAX_BYTES, PlanLine } from './plan-line';
import { describeProfile, profileSelect } from './profile-field';

const TEXT_FIELDS = ['prompt', 'negative_prompt', 'profile', 'aspect', 'res', 'size', 'size_from_ref', 'seed', 'steps', 'cfg'];

export class ImageForm {
  readonly view = new FormView('image-form', 'Queue image');
  private readonly images: FilePicker;
  private readonly plan: PlanLine;

  constructor(private readonly api: Api, cfg: Config, private readonly onCreated: (job: Job) => void) {
    const c = cfg.image;
    const profiles = cfg.profiles.filter((p) => p.kind === 'image');
    const f = this.view;
    f.row('prompt', 'Prompt', h('textarea', { name: 'prompt', rows: 4, maxlength: cfg.limits.prompt_chars, placeholder: 'What to draw, or the edit to make to the images' }), 'Chinese or English. Images are Picture 1, Picture 2… in the order below.', { wide: true });
    f.row('negative_prompt', 'Negative prompt', h('input', { name: 'negative_prompt', type: 'text' }), 'Used only when cfg is above 1.', { wide: true });
    const profile = profileSelect(profiles);
    const profileRow = f.row('profile', 'Profile', profile, '', { wide: true });
    const d = c.defaults;
    const aspect = select('aspect', c.aspects, d.aspect);
    const res = select('res', c.res, d.res, (r) => `${r} (${r === '1K' ? 'about 1' : 'about 4'} MP)`);
    f.row('aspect', 'Aspect', aspect);
    const resRow = f.row('res', 'Tier', res);
    f.group('aspect', 'res');
    const es = c.explicit_size;
    const size = h('input', { name: 'size', type: 'text', placeholder: 'e.g. 1536x864', autocomplete: 'off', spellcheck: 'false' });
    const sizeRule = `Optional <width>x<height>, multiples of ${es.multiple_of} from ${es.min} to ${es.max}; overrides aspect and tier.`;
    const sizeRow = f.row('size', 'Exact size', size, sizeRule);
    const fromRef = h('input', { name: 'size_from_ref', type: 'checkbox', value: 'true' });
    const fromRefRow = f.row('size_from_ref', 'Size from the first image', fromRef, '', { inline: true });
    f.row('seed', 'Seed', h('input', { name: 'seed', type: 'number', value: d.seed, step: 1, inputmode: 'numeric' }), '-1 = random.');
    const stepsRow = f.row('steps', 'Steps', h('input', { name: 'steps', type: 'number', value: d.steps, min: 0, max: cfg.limits.max_steps, step: 1, inputmode: 'numeric' }));
    const cfgRow = f.row('cfg', 'cfg', h('input', { name: 'cfg', type: 'number', value: d.cfg, min: 0, max: c.max_cfg, step: 0.1, inputmode: 'decimal' }));
    f.group('seed', 'steps', 'cfg');

    this.images = new FilePicker('images', 'image', (l) => `At most ${bytes(l.maxBytes ?? 0)} each (png, jpeg, webp, gif).`, () => this.checkFiles());
    const imagesRow = f.row('images', 'Images', this.images.el, '', { wide: true });
    const imagesRule = h('span');
    imagesRow.hint.append(imagesRule, ' ', this.images.limitsEl);

    // The size (and the prompt's placeholder) the profile's weights were made for (a trained demo), put in the size
    // field while the user has not typed one of their own there.
    let suggestedSize = '';
    const prompt = f.form.querySelector<HTMLTextAreaElement>('[name=prompt]')!;
    const placeholder = prompt.placeholder;
    const suggest = (p: (typeof profiles)[number] | undefined) => {
      const s = p?.suggested;
      if (size.value.trim() === suggestedSize) size.value = s?.size ?? '';
      suggestedSize = s?.size ?? '';
      prompt.placeholder = s ? `e.g. ${s.prompt}` : placeholder;
    };

    const refresh = () => {
      const p = profiles.find((x) => x.profile === profile.value);
      describeProfile(profileRow.hint, p);
      suggest(p);
      const max = c.max_images[profile.value] ?? p?.max_images ?? 0;
      this.images.setLimits({ maxCount: max, maxBytes: cfg.limits.image_bytes });
      imagesRule.textContent = p?.can_edit
        ? `None: text-to-image. 1 to ${max}: editing or multi-reference.`
        : `0 to ${max} style references (look, palette, medium); their content is not kept.`;
      fromRef.disabled = !p?.can_edit;
      if (!p?.can_edit) fromRef.checked = false;
      fromRefRow.hint.textContent = p?.can_edit ? `Editing only: the output takes the first image's aspect at the tier's size.` : `${profile.value} cannot edit, so it has no first image to follow.`;
      stepsRow.hint.textContent = `0 = profile default (${p?.default_steps ?? '?'}).`;
      cfgRow.hint.textContent = `0 = profile default (${(p?.default_cfg ?? 1).toFixed(1)}), else 1 to ${c.max_cfg}.`;
      const [w, hgt] = c.sizes[aspect.value]?.[res.value] ?? [0, 0];
      const exact = size.value.trim();
      resRow.hint.textContent = exact ? `Exact size ${exact} set` : fromRef.checked ? 'From the first image' : `${w}×${hgt} px`;
      sizeRow.hint.textContent = p?.suggested && exact === p.suggested.size ? `${p.suggested.size} preselected: ${p.suggested.why}.` : sizeRule;
      this.checkFiles();
    };
    f.form.addEventListener('change', refresh);
    size.addEventListener('input', refresh);
    refresh();
    f.onSubmit(() => this.checkFiles(), () => this.send());
    this.plan = new PlanLine(api, f.form, '/api/v1/image', () => this.planBody());
    f.actions.prepend(this.plan.el);
  }

  /** The JSON request of the form's values for its plan (the seed does not change a plan), or why there is none. */
  private async planBody(): Promise<Record<string, unknown> | string> {
    const form = this.view.form;
    if (!val(form, 'prompt').trim()) return 'Plan: write a prompt to see the job\'s peak GPU memory.';
    if (this.images.problems().length > 0) return 'Plan: none until the chosen files are fixed.';
    const images = this.images.files();
    if (images.reduce((n, file) => n + file.size, 0) > PLAN_FILES_MAX_BYTES) return `Plan: not worked out with images over ${bytes(PLAN_FILES_MAX_BYTES)} together.`;
    const body = jsonFields(form, TEXT_FIELDS.filter((n) => n !== 'seed'), ['steps', 'cfg']);
    if (images.length) body.images = await Promise.all(images.map(dataUrl));
    return body;
  }

  /** Settings of an earlier job. An explicit size (res "custom") goes back into the size field. */
  fill(job: Job): void {
    const form = this.view.form;
    setVal(form, 'prompt', job.prompt);
    setVal(form, 'negative_prompt', job.negative ?? '');
    setVal(form, 'profile', job.profile);
    if (job.res === 'custom') setVal(form, 'size', job.size);
    else {
      setVal(form, 'size', '');
      setVal(form, 'aspect', job.aspect);
      setVal(form, 'res', job.res);
    }
    setVal(form, 'size_from_ref', !!job.size_from_ref);
    setVal(form, 'seed', job.seed);
    setVal(form, 'steps', job.steps);
    setVal(form, 'cfg', job.cfg ?? 0);
    this.view.clearErrors();
    this.view.setResult(loadedNote(job));
  }

  private checkFiles(): boolean {
    this.plan?.schedule();
    return this.view.showFileProblems(this.images);
  }

  private async send(): Promise<void> {
    const f = this.view;
    const fd = new FormData();
    appendFields(fd, f.form, TEXT_FIELDS, ['prompt']);
    for (const file of this.images.files()) fd.append('images', file, file.name);
    await f.busy('Sending…', async () => {
      const job = await this.api.post<Job>('/api/images', fd);
      f.setResult(queuedNote(job));
      this.onCreated(job);
    });
  }
}
