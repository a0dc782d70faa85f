// The worker's speech task as Qwen3-TTS's: the reference clip is audios[0].
import type { SpeechTask } from '../../catalog';
import type { Qwen3TtsTask } from './pipeline';

export function qwen3TtsTaskOf(t: SpeechTask): Qwen3TtsTask {
  const p = t.params;
  return { text: p.text, language: p.language, refText: p.ref_text, refAudioPath: t.audios[0] ?? '', outputPath: t.output, seed: p.seed };
}
