// Video job form: POST /api/jobs (multipart), every field of the spec's table.

import type { Api } from '../api';
import { h, select } from '../dom';
import { bytes } from '../format';
import type { Config, Job } from '../types';
import { FilePicker } from './file-picker';
import { appendFields, FormView, loadedNote, queuedNote, setVal, val } from './form-view';
import { dataUrl, jsonFields, PLAN_FILES_MAX_BYTES, PlanLine } from './plan-line';
import { describeProfile, profileSelect } from './profile-field';

const TEXT_FIELDS = ['prompt', 'profile', 'aspect', 'res', 'seconds', 'seed', 'steps', 'image_mode', 'audio_mode', 'tts_text', 'tts_ref_text', 'tts_language'];

export class VideoForm {
  readonly view = new FormView('video-form', 'Queue video');
  private readonly images: FilePicker;
  private readonly audios: FilePicker;
  private readonly plan: PlanLine;

  constructor(private readonly api: Api, cfg: Config, private readonly onCreated: (job: Job) => void) {
    const v = cfg.video;
    const profiles = cfg.profiles.filter((p) => p.kind === 'video');
    const f = this.view;
    f.row('prompt', 'Prompt', h('textarea', { name: 'prompt', rows: 4, maxlength: cfg.limits.prompt_chars, placeholder: 'Scene, camera and sound. "Quoted dialogue" is lip-synced.' }), 'Chinese or English. Images are <Picture 1>…, clips <Audio 1>… in the prompt.', { wide: true });
    const profile = profileSelect(profiles);
    const profileRow = f.row('profile', 'Profile', profile, '', { wide: true });
    const d = v.defaults;
    const aspect = select('aspect', v.aspects, d.aspect);
    const res = select('res', v.res, d.res);
    f.row('aspect', 'Aspect', aspect);
    const resRow = f.row('res', 'Resolution', res);
    const secondsSel = select('seconds', v.seconds.options.map((o) => String(o.seconds)), String(d.seconds), (s) => `${s} s`);
    const secondsRow = f.row('seconds', 'Length', secondsSel);
    f.group('aspect', 'res', 'seconds');
    f.row('seed', 'Seed', h('input', { name: 'seed', type: 'number', value: d.seed, step: 1, inputmode: 'numeric' }), '-1 = random; the job shows the seed used.');
    const stepsRow = f.row('steps', 'Steps', h('input', { name: 'steps', type: 'number', value: d.steps, min: 0, max: cfg.limits.max_steps, step: 1, inputmode: 'numeric' }));
    f.group('seed', 'steps');

    f.heading('Pictures');
    this.images = new FilePicker('images', 'image', (l) => `Up to ${l.maxCount} images (png, jpeg, webp, gif), at most ${bytes(l.maxBytes ?? 0)} each.`, () => this.checkFiles());
    const imagesRow = f.row('images', 'Images', this.images.el, '', { wide: true });
    imagesRow.hint.appendChild(this.images.limitsEl);
    this.images.setLimits({ maxCount: v.max_images, maxBytes: cfg.limits.image_bytes });
    f.row('image_mode', 'Image mode', select('image_mode', v.image_modes, d.image_mode), 'keyframe: pinned to frames (1: first; 2: first and last; more: spread in order). reference: subjects or style only, named <Picture N>.');

    f.heading('Sound');
    const as = v.audio_seconds;
    this.audios = new FilePicker('audios', 'audio', (l) => `Up to ${l.maxCount} clips of ${as.min} to ${as.max} s each.`, () => this.checkFiles());
    const audiosRow = f.row('audios', 'Audio clips', this.audios.el, '', { wide: true });
    audiosRow.hint.appendChild(this.audios.limitsEl);
    this.audios.setLimits({ maxCount: v.max_audios, seconds: as });
    f.row('audio_mode', 'Audio mode', select('audio_mode', v.audio_modes, d.audio_mode), 'voice: the voice of each clip speaks the prompt\'s dialogue (images then act as references). track: clip 1 is the soundtrack, lip-synced.');
    f.row('tts_text', 'Speech text', h('textarea', { name: 'tts_text', rows: 2, placeholder: 'Optional: spoken in the voice of clip 1 and used as the soundtrack' }), 'Set: speech in the voice of Audio 1 becomes the soundtrack (like track mode).', { wide: true });
    f.row('tts_ref_text', 'Clip 1 transcript', h('input', { name: 'tts_ref_text', type: 'text' }), 'Optional; improves the cloned voice.');
    f.row('tts_language', 'Speech language', select('tts_language', v.tts_languages, d.tts_language));
    f.group('tts_ref_text', 'tts_language');

    // The aspect, tier and length (and the prompt's placeholder) the profile's weights were made for (a trained demo),
    // put in those fields while the user has not chosen other values there; back to the defaults when the profile has
    // no suggestion.
    const defaults = { aspect: aspect.value, res: res.value, seconds: secondsSel.value };
    let shown = { ...defaults };
    const prompt = f.form.querySelector<HTMLTextAreaElement>('[name=prompt]')!;
    const placeholder = prompt.placeholder;
    const suggest = (p: (typeof profiles)[number] | undefined) => {
      const s = p?.suggested;
      const want = {
        aspect: s?.aspect ?? defaults.aspect,
        res: s?.res ?? defaults.res,
        seconds: s?.seconds !== undefined ? String(s.seconds) : defaults.seconds,
      };
      for (const [el, k] of [[aspect, 'aspect'], [res, 'res'], [secondsSel, 'seconds']] as const) {
        if (el.value === shown[k]) el.value = want[k];
      }
      shown = want;
      prompt.placeholder = s ? `e.g. ${s.prompt}` : placeholder;
    };

    let profileShown = '';
    const refresh = () => {
      const p = profiles.find((x) => x.profile === profile.value);
      describeProfile(profileRow.hint, p);
      if (profile.value !== profileShown) suggest(p);
      profileShown = profile.value;
      stepsRow.hint.textContent = `0 = profile default (${p?.default_steps ?? '?'}), at most ${cfg.limits.max_steps}.`;
      const [w, hgt] = v.sizes[aspect.value]?.[res.value] ?? [0, 0];
      resRow.hint.textContent = `${w}×${hgt} px`;
      const opt = v.seconds.options.find((o) => String(o.seconds) === secondsSel.value);
      const frames = opt?.frames;
      secondsRow.hint.textContent = frames ? `${frames} frames (${(frames / v.fps).toFixed(2)} s at ${v.fps} fps)` : '';
      const s = p?.suggested;
      if (s && res.value === s.res && String(s.seconds) === secondsSel.value && (!s.aspect || aspect.value === s.aspect)) {
        secondsRow.hint.textContent += `. ${s.aspect ? `${s.aspect} ` : ''}${s.res}, ${s.seconds} s preselected: ${s.why}.`;
      }
    };
    f.form.addEventListener('change', refresh);
    refresh();
    f.onSubmit(() => this.checkFiles(), () => this.send());
    this.plan = new PlanLine(api, f.form, '/api/v1/generate', () => this.planBody());
    f.actions.prepend(this.plan.el);
  }

  /** The JSON request of the form's values for its plan (the seed does not change a plan), or why there is none. */
  private async planBody(): Promise<Record<string, unknown> | string> {
    const form = this.view.form;
    if (!val(form, 'prompt').trim()) return 'Plan: write a prompt to see the job\'s peak GPU memory.';
    if ([this.images, this.audios].some((p) => p.problems().length > 0)) return 'Plan: none until the chosen files are fixed.';
    const [images, audios] = [this.images.files(), this.audios.files()];
    if ([...images, ...audios].reduce((n, file) => n + file.size, 0) > PLAN_FILES_MAX_BYTES) return `Plan: not worked out with files over ${bytes(PLAN_FILES_MAX_BYTES)} together.`;
    const body = jsonFields(form, TEXT_FIELDS.filter((n) => n !== 'seed'), ['seconds', 'steps']);
    if (images.length) body.images = await Promise.all(images.map(dataUrl));
    if (audios.length) body.audios = await Promise.all(audios.map(dataUrl));
    return body;
  }

  /** Settings of an earlier job (its input files are not kept, so they are not restored). */
  fill(job: Job): void {
    const form = this.view.form;
    for (const [k, value] of Object.entries({ prompt: job.prompt, profile: job.profile, aspect: job.aspect, res: job.res, seconds: job.seconds, seed: job.seed, steps: job.steps })) setVal(form, k, value);
    this.view.clearErrors();
    this.view.setResult(loadedNote(job));
  }

  /** Both pickers are checked (and their rows updated) even when the first has problems. */
  private checkFiles(): boolean {
    this.plan?.schedule();
    return [this.images, this.audios].map((picker) => this.view.showFileProblems(picker)).every(Boolean);
  }

  private async send(): Promise<void> {
    const f = this.view;
    const fd = new FormData();
    appendFields(fd, f.form, TEXT_FIELDS, ['prompt']);
    for (const file of this.images.files()) fd.append('images', file, file.name);
    for (const file of this.audios.files()) fd.append('audios', file, file.name);
    await f.busy('Sending…', async () => {
      const job = await this.api.post<Job>('/api/jobs', fd);
      f.setResult(queuedNote(job));
      this.onCreated(job);
    });
  }
}
