import { Inject, Injectable } from '@nestjs/common';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { BadInputError, UnavailableError } from '../common/errors';
import { SETTINGS, Settings } from '../config/settings';
import { CLIP_SECONDS, TTS_PROFILE } from '../catalog';
import { newJobId } from '../jobs/job-id';
import { checkLanguage, checkPrompt } from '../jobs/job-requests';
import { InputFile } from '../jobs/input-probe';
import { JobsService } from '../jobs/jobs.service';
import type { SpeechTask } from '../models/qwen3_tts/pipeline';
import { PipelineRegistry } from '../scheduler/pipeline';
import { Scheduler } from '../scheduler/scheduler';

/** What the speech pipeline receives: the pipeline's own SpeechTask. The speech endpoints have no seed field, so they
 * leave it out and every request draws a fresh one; callers with a seed of their own (a video job's tts_text) pass it. */
export type TtsTaskPayload = SpeechTask;

/** Speech is synchronous for the client but runs through the same single-GPU queue as every job. */
@Injectable()
export class TtsService {
  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly scheduler: Scheduler,
    private readonly registry: PipelineRegistry,
    private readonly jobs: JobsService,
  ) {}

  async speak(req: { text?: string; language?: string; ref_text?: string }, loadRef: () => Promise<InputFile | undefined>, signal?: AbortSignal): Promise<{ audio: string }> {
    const text = checkPrompt(req.text, 'text');
    const language = checkLanguage(req.language, 'language');
    if (!this.registry.get('tts', TTS_PROFILE)) {
      throw new UnavailableError('speech synthesis is not available yet: no Qwen3-TTS pipeline is built into this service (see /api/config)');
    }
    const ref = await loadRef();
    if (!ref) throw new BadInputError('ref_audio is required: a reference clip of 3 to 30 s');
    await this.jobs.checkAudioLengths([ref], CLIP_SECONDS.speech);
    const id = `tts_${newJobId()}`;
    const dir = join(this.settings.dataDir, 'inputs', id);
    await mkdir(dir, { recursive: true });
    const refAudioPath = join(dir, `ref${extname(ref.name ?? '').slice(0, 8) || '.bin'}`);
    await writeFile(refAudioPath, ref.data);
    const payload: TtsTaskPayload = { text, language, refText: req.ref_text ?? '', refAudioPath, outputPath: join(this.jobs.outDir, `${id}.wav`) };
    const task = { id, kind: 'tts', profile: TTS_PROFILE, payload };
    const onGone = () => this.scheduler.cancel(id);
    signal?.addEventListener('abort', onGone, { once: true });
    try {
      const outcome = await this.scheduler.runToEnd(task);
      if (outcome.status === 'failed') {
        if (outcome.cause instanceof BadInputError) throw outcome.cause;
        throw new UnavailableError(`speech synthesis failed: ${outcome.error}`);
      }
      return { audio: `/out/${id}.wav` };
    } finally {
      signal?.removeEventListener('abort', onGone);
      await rm(dir, { recursive: true, force: true });
    }
  }
}
