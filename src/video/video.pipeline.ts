// The six 'video' pipeline entries: MiniMax H3 on the engine, one per profile of src/models/minimax_h3/profiles.ts,
// from the real checkpoints in WEIGHTS_DIR when the profile's variant is complete (npm run weights -- pull <profile>),
// else from the demo checkpoint generated once into DEMO_WEIGHTS_DIR (all six share it). Registered while the module
// is built (tests that register their own pipelines for a profile then replace it).
import type { FactoryProvider } from '@nestjs/common';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LOGGER } from '../common/tokens';
import { SETTINGS, Settings } from '../config/settings';
import { EngineHolder } from '../engine/engine';
import { DEMO_ADAPTERS, planDemoH3 } from '../models/minimax_h3/demo';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Dirs } from '../models/minimax_h3/pipeline';
import { H3_PROFILE_NAMES, h3Profile, h3TransformerFiles, loadH3Transformer, type H3Profile } from '../models/minimax_h3/profiles';
import { PipelineEntry, PipelineRegistry } from '../scheduler/pipeline';
import { checkProfile, componentRoot, demoCheckpointVersion, ensureDemoCheckpoint, profileChecker, weightsNote, weightsState, type ProfileWeights } from '../weights';

export const VIDEO_PIPELINES = Symbol('VIDEO_PIPELINES');

/** GPU working set on top of the weights (activations of a 768p 10 s step, one VAE tile, the audio chunk), for the
 * fits-beside estimate. A guess until bench:video measures it at the real size. */
const WORKING_BYTES = 8 * 2 ** 30;

export function videoPipelineEntry(profileName: string, settings: Pick<Settings, 'weightsDir' | 'demoWeightsDir'>, holder: EngineHolder, log?: Pick<Logger, 'info'>): PipelineEntry {
  const profile = h3Profile(profileName);
  const weights = profileChecker(profile.name, settings.weightsDir); // one folder check per second for config/health
  let measured: number | undefined;
  return {
    kind: 'video',
    profile: profile.name,
    weights: () => weightsState(weights(), true),
    note: () => {
      const w = weights();
      if (w.state === 'real') return `MiniMax H3 ${weightsNote(w)}`;
      const made = demoCheckpointVersion(settings.demoWeightsDir, w.demo) ? 'generated' : 'generated at the first video job';
      return `demo: a tiny random MiniMax H3 checkpoint (${made}, ${join(settings.demoWeightsDir, w.demo)}); the video and its sound are noise. Real weights: ${weightsNote(w)}`;
    },
    residentBytes: () => measured ?? estimateBytes(weights()) + WORKING_BYTES,
    create: () => {
      // the real checkpoint, or the demo one, decided at load time (a pull may finish while the service runs)
      let real: ProfileWeights | null = null;
      let demoRoot = '';
      return new MiniMaxH3Pipeline({
        engine: () => holder.get(),
        dirs: async (e): Promise<H3Dirs> => {
          const w = checkProfile(profile.name, settings.weightsDir);
          if (w.state === 'real') {
            real = w;
            return realDirs(profile, w);
          }
          real = null;
          const plan = await planDemoH3(e);
          demoRoot = await ensureDemoCheckpoint({ name: w.demo, version: plan.version, root: settings.demoWeightsDir, generate: plan.write });
          return h3DirsFromRoot(demoRoot);
        },
        loadTransformer: (e, dirs, o) => {
          const demo = { transformer: dirs.transformer, adapter: profile.adapter ? join(demoRoot, DEMO_ADAPTERS[profile.adapter]) : undefined };
          return loadH3Transformer(e, profile, real ?? demo, { dtype: o.dtype });
        },
        textEncoderInt8: profile.weights === 'int8',
        sampler: profile.stepCache ? { stepCache: profile.stepCache } : undefined,
        onLoaded: (bytes, dirs) => {
          measured = bytes + WORKING_BYTES;
          log?.info({ profile: profile.name, transformer: dirs.transformer, gpu_bytes: bytes }, 'video model loaded');
        },
      });
    },
  };
}

/** The folders of a complete variant: the transformer where the profile's variant has it (the 8-step checkpoint, an
 * int8 file), every other part from its own component's checkpoint folder. */
export function realDirs(profile: H3Profile, w: ProfileWeights): H3Dirs {
  const part = (component: string, folder: string) => join(componentRoot(w, component), folder);
  return {
    transformer: h3TransformerFiles(profile, w).transformer,
    textEncoder: part('text_encoder', 'text_encoder'),
    tokenizer: part('tokenizer', 'tokenizer'),
    vae: part('vae', 'vae'),
    audioVae: part('audio_vae', 'audio_vae'),
  };
}

/** Before a first load: the transformer's and VAEs' files (int8 profiles: about half the 16-bit transformer). */
function estimateBytes(w: ProfileWeights): number {
  if (w.state !== 'real') return 256 * 2 ** 20; // the demo checkpoint is a few MB
  let total = 0;
  const add = (path: string, scale = 1) => {
    if (!existsSync(path)) return;
    if (statSync(path).isFile()) total += statSync(path).size * scale;
    else for (const f of readdirSync(path)) if (f.endsWith('.safetensors')) total += statSync(join(path, f)).size * scale;
  };
  const profile = h3Profile(w.profile);
  const dirs = realDirs(profile, w);
  // a 16-bit file quantised at load halves; an int8 file loads as it is
  add(dirs.transformer, profile.weights === 'int8' && existsSync(dirs.transformer) && statSync(dirs.transformer).isDirectory() ? 0.5 : 1);
  add(dirs.vae);
  add(dirs.audioVae);
  return total;
}

/** Registers the six video pipelines in the app's registry (app.module.ts lists this provider). */
export const videoPipelinesProvider: FactoryProvider = {
  provide: VIDEO_PIPELINES,
  useFactory: (settings: Settings, registry: PipelineRegistry, holder: EngineHolder, log: Logger) =>
    H3_PROFILE_NAMES.map((name) => {
      const entry = videoPipelineEntry(name, settings, holder, log);
      registry.register(entry);
      return entry;
    }),
  inject: [SETTINGS, PipelineRegistry, EngineHolder, LOGGER],
};
