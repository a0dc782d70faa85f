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
import { VoiceStore } from './voices.store';
import { Planner } from '../plan/planner';

interface SpeechRequest { text?: string; language?: string; ref_text?: string; voice?: string }

/** Speech is synchronous for the client but runs through the same single-GPU queue as every job. */
@Injectable()
export class TtsService {
  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly scheduler: Scheduler,
    private readonly inputs: JobInputs,
    private readonly files: JobFiles,
    private readonly voices: VoiceStore,
    private readonly planner: Planner,
  ) {}

  /** The JSON form: ref_audio is a URL or data URI, fetched once the checks that need no bytes passed; or `voice`
   * names a saved voice in its place. */
  speakFromRef(req: SpeechRequest & { ref_audio?: string; dry_run?: boolean }, signal?: AbortSignal): Promise<{ audio: string } | Record<string, unknown>> {
    const saved = this.savedVoice(req, req.ref_audio !== undefined);
    const loadRef = saved ? async () => saved.clip : async () => (req.ref_audio === undefined ? undefined : this.inputs.fetchOne(req.ref_audio, 'ref_audio', 'audio'));
    return req.dry_run ? this.plan(saved?.req ?? req, loadRef, signal) : this.speak(saved?.req ?? req, loadRef, signal);
  }

  /** The multipart form: the clip came as the ref_audio file part, or `voice` names a saved voice in its place. */
  speakFromForm(req: SpeechRequest, clip: InputFile | undefined, signal?: AbortSignal): Promise<{ audio: string }> {
    const saved = this.savedVoice(req, clip !== undefined);
    return saved ? this.speak(saved.req, async () => saved.clip, signal) : this.speak(req, async () => clip, signal);
  }

  /** `voice` (an extension) in place of ref_audio: the saved voice's clip becomes the request's clip, as an upload
   * would, and its transcript the ref_text when the request gives none. Blank: no voice. */
  private savedVoice(req: SpeechRequest, clipGiven: boolean): { req: SpeechRequest; clip: InputFile } | undefined {
    const key = req.voice?.trim();
    if (!key) return undefined;
    if (clipGiven) throw new BadInputError('give ref_audio or voice, not both: voice names a saved voice whose clip is the reference in place of ref_audio');
    const v = this.voices.named(key);
    return { req: { ...req, ref_text: req.ref_text?.trim() ? req.ref_text : v.ref_text }, clip: this.voices.clip(v) };
  }

  /** A request's checks, its clip loaded and its length checked: what speaking it and planning it both start with. */
  private async checked(req: SpeechRequest, loadRef: () => Promise<InputFile | undefined>) {
    const text = checkPrompt(req.text, 'text');
    const language = checkLanguage(req.language, 'language');
    const refText = checkRefText(req.ref_text, 'ref_text');
    if (!this.scheduler.hasWorker()) throw new UnavailableError('speech synthesis needs a GPU worker, and this API runs without one (WORKERS=none)');
    if (this.scheduler.serves('tts', TTS_PROFILE) === false) throw notServed();
    const ref = await loadRef();
    if (!ref) throw new BadInputError(`ref_audio is required: a reference clip of ${CLIP_SECONDS.speech.minS} to ${CLIP_SECONDS.speech.maxS} s (or voice: a saved voice's id or name)`);
    const [seconds] = await this.inputs.checkAudioLengths([ref], CLIP_SECONDS.speech);
    return { text, language, refText, ref, seconds: seconds! };
  }

  /** dry_run (the JSON form): the plan of this speech, its clip counted by its length; nothing run or kept. */
  async plan(req: SpeechRequest, loadRef: () => Promise<InputFile | undefined>, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const { text, language, refText, seconds } = await this.checked(req, loadRef);
    return (await this.planner.plan({ kind: 'tts', text, language, ref_text: refText, ref_audio: seconds }, signal)) as unknown as Record<string, unknown>;
  }

  async speak(req: SpeechRequest, loadRef: () => Promise<InputFile | undefined>, signal?: AbortSignal): Promise<{ audio: string }> {
    const { text, language, refText, ref } = await this.checked(req, loadRef);
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
