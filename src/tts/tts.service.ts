import { Inject, Injectable } from '@nestjs/common';
import { BadInputError, UnavailableError } from '../common/errors';
import { SETTINGS, Settings } from '../config/settings';
import { CLIP_SECONDS, TTS_PROFILE } from '../catalog';
import { newJobId } from '../jobs/job-id';
import { checkLanguage, checkPrompt, checkRefText } from '../jobs/job-requests';
import { InputFile } from '../jobs/input-probe';
import { JobFiles } from '../jobs/job.files';
import { JobInputs } from '../jobs/job.inputs';
import { Scheduler } from '../scheduler/scheduler';
import type { SpeechTask } from '../worker/protocol';

/** Speech is synchronous for the client but runs through the same single-GPU queue as every job. */
@Injectable()
export class TtsService {
  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly scheduler: Scheduler,
    private readonly inputs: JobInputs,
    private readonly files: JobFiles,
  ) {}

  /** The JSON form: ref_audio is a URL or data URI, fetched once the checks that need no bytes passed. */
  speakFromRef(req: { text?: string; language?: string; ref_text?: string; ref_audio: string }, signal?: AbortSignal): Promise<{ audio: string }> {
    return this.speak(req, () => this.inputs.fetchOne(req.ref_audio, 'ref_audio', 'audio'), signal);
  }

  async speak(req: { text?: string; language?: string; ref_text?: string }, loadRef: () => Promise<InputFile | undefined>, signal?: AbortSignal): Promise<{ audio: string }> {
    const text = checkPrompt(req.text, 'text');
    const language = checkLanguage(req.language, 'language');
    const refText = checkRefText(req.ref_text, 'ref_text');
    if (!this.scheduler.hasWorker()) throw new UnavailableError('speech synthesis needs a GPU worker, and this API runs without one (WORKERS=none)');
    if (this.scheduler.serves('tts', TTS_PROFILE) === false) throw notServed();
    const ref = await loadRef();
    if (!ref) throw new BadInputError('ref_audio is required: a reference clip of 3 to 30 s');
    await this.inputs.checkAudioLengths([ref], CLIP_SECONDS.speech);
    const id = `tts_${newJobId()}`;
    const saved = await this.files.saveSpeech(id, ref);
    // no seed: the speech endpoints have none, so every request draws a fresh one
    const task: SpeechTask = {
      id, kind: 'tts', profile: TTS_PROFILE, params: { text, language, ref_text: refText }, images: [], audios: [saved.clip], output: saved.output,
    };
    const onGone = () => this.scheduler.cancel(id);
    signal?.addEventListener('abort', onGone, { once: true });
    try {
      const outcome = await this.scheduler.runToEnd(task);
      if (outcome.status === 'failed') {
        if (outcome.code === 'bad_input') throw new BadInputError(outcome.error);
        if (outcome.code === 'unavailable') throw notServed();
        throw new UnavailableError(`speech synthesis failed: ${outcome.error}`);
      }
      return { audio: `/out/${id}.wav` };
    } finally {
      signal?.removeEventListener('abort', onGone);
      await this.files.clearSpeech(id, saved.clip);
    }
  }
}

const notServed = () => new UnavailableError('speech synthesis is not available yet: no Qwen3-TTS pipeline is built into this service (see /api/config)');
