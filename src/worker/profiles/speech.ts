// The 'tts' entry: Qwen3-TTS on the engine, from the real checkpoint in WEIGHTS_DIR when it is complete (npm run
// weights -- pull tts), else from the demo checkpoint generated once into DEMO_WEIGHTS_DIR. Interactive: speech
// requests go ahead of queued jobs and run at a running job's safe point when the model fits beside it.
import { join } from 'node:path';
import type { Logger } from 'pino';
import { TTS_PROFILE } from '../../catalog';
import type { EngineHolder } from '../../engine/engine';
import { planDemoQwen3Tts } from '../../models/qwen3_tts/demo';
import { Qwen3TtsPipeline } from '../../models/qwen3_tts/pipeline';
import { qwen3TtsTaskOf } from '../../models/qwen3_tts/task';
import { componentRoot } from '../../weights';
import type { ServedEntry } from '../registry';
import { safetensorsBytes, taskPipeline, WeightsSource, type WeightsDirs } from './weights-source';

/** GPU working set on top of the weights (KV caches, activations, codec chunks), for the fits-beside estimate. */
const WORKING_BYTES = 256 * 2 ** 20;

/** The speech model's weights: real from WEIGHTS_DIR when complete, else the demo checkpoint (generated once). */
export function speechWeightsSource(dirs: WeightsDirs): WeightsSource {
  return new WeightsSource(
    {
      profile: TTS_PROFILE,
      model: 'Qwen3-TTS-12Hz',
      demoModel: 'a tiny random Qwen3-TTS checkpoint',
      demoResult: "the speech is noise in the reference voice's place",
      demoWhen: 'the first speech request',
      workingBytes: WORKING_BYTES,
      // bf16 on disk loads as f16; the codec stays f32
      estimateBytes: (w) => {
        if (w.state !== 'real') return 64 * 2 ** 20; // the demo checkpoint is a few MB
        const root = componentRoot(w, 'model');
        return safetensorsBytes(join(root, 'model.safetensors')) + safetensorsBytes(join(root, 'speech_tokenizer', 'model.safetensors'));
      },
    },
    dirs,
  );
}

/** An unloaded Qwen3-TTS pipeline on the source's weights: the tts profile's, and the one a video job with tts_text
 * loads for its speech (video-speech.ts), so both speak through the same code. */
export function newSpeechPipeline(source: WeightsSource, holder: EngineHolder, o: { log?: Pick<Logger, 'info'>; onLoaded?: (bytes: number) => void; onAudio?: (samples: Float32Array) => void } = {}): Qwen3TtsPipeline {
  return new Qwen3TtsPipeline({
    engine: () => holder.get(),
    checkpoint: (e) => source.choose(e, { real: (w) => componentRoot(w, 'model'), demo: (root) => root, plan: planDemoQwen3Tts }),
    onLoaded: (bytes, dir) => {
      o.onLoaded?.(bytes);
      o.log?.info({ dir, gpu_bytes: bytes }, 'speech model loaded');
    },
    onAudio: o.onAudio,
  });
}

export function speechProfileEntry(dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry {
  const source = speechWeightsSource(dirs);
  return {
    kind: 'tts',
    profile: TTS_PROFILE,
    interactive: true,
    weights: () => source.state(),
    note: () => source.note(),
    residentBytes: () => source.residentBytes(),
    create: () => taskPipeline(newSpeechPipeline(source, holder, { log, onLoaded: (bytes) => source.loaded(bytes) }), 'tts', qwen3TtsTaskOf),
  };
}
