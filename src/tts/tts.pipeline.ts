// The 'tts' pipeline entry: Qwen3-TTS on the engine, from the real checkpoint in WEIGHTS_DIR when it is complete
// (npm run weights -- pull tts), else from the demo checkpoint generated once into DEMO_WEIGHTS_DIR. Registered
// while the module is built (before tests register their own pipelines, which then replace it).
import type { FactoryProvider } from '@nestjs/common';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LOGGER } from '../common/tokens';
import { SETTINGS, Settings } from '../config/settings';
import { EngineHolder } from '../engine/engine';
import { TTS_PROFILE } from '../catalog';
import { planDemoQwen3Tts } from '../models/qwen3_tts/demo';
import { Qwen3TtsPipeline } from '../models/qwen3_tts/pipeline';
import { PipelineEntry, PipelineRegistry } from '../scheduler/pipeline';
import { checkProfile, componentRoot, demoCheckpointVersion, ensureDemoCheckpoint, profileChecker, weightsNote, weightsState } from '../weights';

export const TTS_PIPELINE = Symbol('TTS_PIPELINE');

/** GPU working set on top of the weights (KV caches, activations, codec chunks), for the fits-beside estimate. */
const WORKING_BYTES = 256 * 2 ** 20;

export function ttsPipelineEntry(settings: Pick<Settings, 'weightsDir' | 'demoWeightsDir'>, holder: EngineHolder, log?: Pick<Logger, 'info'>): PipelineEntry {
  const profile = profileChecker(TTS_PROFILE, settings.weightsDir); // one folder check per second for config/health
  let measured: number | undefined;
  return {
    kind: 'tts',
    profile: TTS_PROFILE,
    interactive: true,
    weights: () => weightsState(profile(), true),
    note: () => {
      const w = profile();
      if (w.state === 'real') return `Qwen3-TTS-12Hz ${weightsNote(w)}`;
      const demo = join(settings.demoWeightsDir, w.demo);
      const made = demoCheckpointVersion(settings.demoWeightsDir, w.demo) ? 'generated' : 'generated at the first speech request';
      return `demo: a tiny random Qwen3-TTS checkpoint (${made}, ${demo}); the speech is noise in the reference voice's place. Real weights: ${weightsNote(w)}`;
    },
    // Before a first load: the weight files' sizes (bf16 on disk loads as f16; the codec stays f32) plus a working set.
    residentBytes: () => measured ?? estimateBytes(profile()) + WORKING_BYTES,
    create: () =>
      new Qwen3TtsPipeline({
        engine: () => holder.get(),
        checkpoint: async (e) => {
          const w = checkProfile(TTS_PROFILE, settings.weightsDir);
          if (w.state === 'real') return componentRoot(w, 'model');
          const plan = await planDemoQwen3Tts(e);
          return ensureDemoCheckpoint({ name: w.demo, version: plan.version, root: settings.demoWeightsDir, generate: plan.write });
        },
        onLoaded: (bytes, dir) => {
          measured = bytes + WORKING_BYTES;
          log?.info({ dir, gpu_bytes: bytes }, 'speech model loaded');
        },
      }),
  };
}

function estimateBytes(w: ReturnType<typeof checkProfile>): number {
  if (w.state !== 'real') return 64 * 2 ** 20; // the demo checkpoint is a few MB
  const root = componentRoot(w, 'model');
  let total = 0;
  for (const f of ['model.safetensors', 'speech_tokenizer/model.safetensors']) {
    const p = join(root, f);
    if (existsSync(p)) total += statSync(p).size;
  }
  return total;
}

/** Registers the speech pipeline in the app's registry (app.module.ts lists this provider). */
export const ttsPipelineProvider: FactoryProvider = {
  provide: TTS_PIPELINE,
  useFactory: (settings: Settings, registry: PipelineRegistry, holder: EngineHolder, log: Logger) => {
    const entry = ttsPipelineEntry(settings, holder, log);
    registry.register(entry);
    return entry;
  },
  inject: [SETTINGS, PipelineRegistry, EngineHolder, LOGGER],
};
