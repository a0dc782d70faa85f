// tts_text on video jobs (docs/models/minimax-h3.md "Speech as the soundtrack (tts_text)"): the speech model
// (Qwen3-TTS, the tts profile's own pipeline, speech.ts, and task mapping, models/qwen3_tts/task.ts) speaks tts_text in the voice of audios[0],
// with tts_ref_text, tts_language and the job's seed, into a wav beside the job's output; the MiniMax H3 pipeline
// calls this inside 编码提示词/图片 (after its text encoder is freed, before sampling) and reads the wav exactly as it
// reads audios[0] of an audio_mode track job (track-inputs.ts readTrack: 32 kHz stereo, cut or padded to the video).
// The worker composes the two models here, so models/minimax_h3 imports nothing of models/qwen3_tts.
import { TTS_PROFILE } from '../../catalog';
import { BadInputError } from '../../common/errors';
import type { Pipeline, RunContext } from '../../models/common/pipeline';
import type { Qwen3TtsTask } from '../../models/qwen3_tts/pipeline';
import { qwen3TtsTaskOf } from '../../models/qwen3_tts/task';
import type { SpeechTask, VideoTask } from '../protocol';

/** Whether a video task speaks: a tts_text that is not blank. */
export function speaks(t: VideoTask): boolean {
  return t.params.tts_text.trim() !== '';
}

/** An unloaded speech pipeline; `onAudio` sees the samples it writes (24 kHz mono). */
export type SpeechFactory = (o: { onAudio(samples: Float32Array): void }) => Pipeline<Qwen3TtsTask>;

/** The speech request of a tts_text video job, as the tts profile's protocol task: the voice is audios[0], the job's
 * seed makes the same job give the same speech. */
export function speechRequestOf(t: VideoTask, output: string): SpeechTask {
  const p = t.params;
  return { id: t.id, kind: 'tts', profile: TTS_PROFILE, images: [], audios: t.audios.slice(0, 1), output, params: { text: p.tts_text, language: p.tts_language, ref_text: p.tts_ref_text, seed: p.seed } };
}

export interface SpokenTrackOptions {
  /** Sees the speech as the speech model wrote it (tests: the soundtrack must be it). */
  onSpeech?(samples: Float32Array): void;
}

/**
 * The VideoTask.speech of a tts_text job: loads a speech pipeline, speaks into `wav`, and unloads it (its GPU memory
 * is freed before the video model samples) whatever happens. The speech model's own stages are not reported (the
 * job stays in 编码提示词/图片, the spec's order); its frame progress is the stage's progress. Its input errors name
 * the video job's fields (audios[0], tts_language).
 */
export function spokenTrack(t: VideoTask, speech: SpeechFactory, wav: string, o: SpokenTrackOptions = {}): (ctx: RunContext) => Promise<string> {
  return async (ctx) => {
    let samples = -1;
    const pipeline = speech({
      onAudio: (s) => {
        samples = s.length;
        o.onSpeech?.(s);
      },
    });
    const inner: RunContext = { signal: ctx.signal, stage: () => {}, progress: (v, m) => ctx.progress(v, m), safePoint: async () => {} };
    try {
      await pipeline.load(inner);
      await pipeline.run(qwen3TtsTaskOf(speechRequestOf(t, wav)), inner);
    } catch (err) {
      if (err instanceof BadInputError) throw new BadInputError(`tts_text: ${err.message.replace(/^ref_audio\b/, 'audios[0] (the voice)').replace(/^language\b/, 'tts_language')}`);
      throw err;
    } finally {
      await pipeline.unload();
    }
    // a text the model ends at once (it picked end-of-speech first): no clip to read
    if (samples === 0) throw new Error('tts_text: the speech model ended without a sound for this text (try another seed or wording)');
    return wav;
  };
}
