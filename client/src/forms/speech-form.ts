// Speech form: POST /api/tts (multipart). Synchronous: the answer is the wav, played here.

import type { Api } from '../api';
import { h, select } from '../dom';
import { duration, sentence } from '../format';
import type { Config } from '../types';
import { FilePicker } from './file-picker';
import { appendFields, FormView } from './form-view';

export class SpeechForm {
  readonly view = new FormView('speech-form', 'Speak');
  private readonly ref: FilePicker;

  constructor(private readonly api: Api, cfg: Config) {
    const t = cfg.tts;
    const f = this.view;
    if (!t.available) f.body.appendChild(h('p', { class: 'notice' }, `Speech requests answer 503 until the model is built. ${sentence(t.note ?? '')}`));
    f.row('text', 'Text', h('textarea', { name: 'text', rows: 3, placeholder: 'What the cloned voice says' }), '', { wide: true });
    const rs = t.ref_audio_seconds;
    this.ref = new FilePicker('ref_audio', 'audio', () => `One clip of ${rs.min} to ${rs.max} s: the voice to clone.`, () => this.checkFile());
    const refRow = f.row('ref_audio', 'Reference clip', this.ref.el, '', { wide: true });
    refRow.hint.appendChild(this.ref.limitsEl);
    this.ref.setLimits({ maxCount: 1, seconds: rs });
    f.row('ref_text', 'Clip transcript', h('input', { name: 'ref_text', type: 'text' }), 'Optional; improves quality.');
    f.row('language', 'Language', select('language', t.languages, t.defaults.language));
    f.group('ref_text', 'language');
    f.onSubmit(() => this.checkFile(), () => this.send());
  }

  private checkFile(): boolean {
    return this.view.showFileProblems(this.ref);
  }

  private async send(): Promise<void> {
    const f = this.view;
    const fd = new FormData();
    appendFields(fd, f.form, ['text', 'language', 'ref_text'], ['text']);
    const [clip] = this.ref.files();
    if (clip) fd.append('ref_audio', clip, clip.name);
    else return f.fieldError('ref_audio', 'Choose a reference clip: the voice to clone.');
    const started = performance.now();
    const timer = setInterval(() => f.setResult(`Waiting for the GPU… ${duration((performance.now() - started) / 1000)}`), 500);
    f.setResult('Sending…');
    await f.busy('Speaking…', async () => {
      try {
        const { audio } = await this.api.post<{ audio: string }>('/api/tts', fd);
        const name = audio.split('/').pop() ?? 'speech.wav';
        f.setResult(
          h('div', { class: 'speech-result' },
            h('audio', { src: audio, controls: true, preload: 'metadata' }),
            h('a', { href: audio, download: name }, `Download ${name}`),
            h('span', { class: 'muted' }, ` made in ${duration((performance.now() - started) / 1000)}`)),
        );
      } catch (err) {
        f.setResult('');
        throw err;
      } finally {
        clearInterval(timer);
      }
    });
  }
}
