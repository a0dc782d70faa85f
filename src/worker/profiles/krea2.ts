// The 'image' entries imgart_turbo (16-bit) and imgart_turbo_int8 (int8 DiT linears): Krea 2 Turbo on the engine,
// from the real weights in WEIGHTS_DIR when all three parts are there (weights/krea-2.json: the DiT placed by hand,
// npm run weights -- pull imgart_turbo for the text encoder and the VAE), else from the demo checkpoint generated
// once into DEMO_WEIGHTS_DIR (shared by both profiles: same files, the int8 happens at load). Any part may be found in
// the Hugging Face cache or, as one file in ComfyUI's key names, in ComfyUI's folders (src/weights/state.ts).
import { join } from 'node:path';
import type { Logger } from 'pino';
import { acceptsFor, capabilitiesOf } from '../../catalog';
import type { EngineHolder } from '../../engine/engine';
import { KREA2_LARGE_WIDE, parseKrea2Config } from '../../models/krea2/config';
import { DEMO_KREA2_DIT, planDemoKrea2 } from '../../models/krea2/demo';
import { krea2DemoLayout, krea2Layout, Krea2Pipeline } from '../../models/krea2/pipeline';
import { QWEN3_VL_TOKENIZER_DIR } from '../../models/krea2/comfy-parts';
import { projectRoot } from '../../paths';
import { componentPath } from '../../weights';
import type { ServedEntry } from '../registry';
import { krea2TaskOf } from '../../models/krea2/task';
import { krea2LoraModel, withTaskLoras } from './loras';
import { safetensorsBytes, taskPipeline, WeightsSource, type WeightsDirs } from './weights-source';

/** The Krea 2 Turbo profiles: whether the DiT's linears are quantised to int8 at load. */
export const KREA2_PROFILES = { imgart_turbo: { int8: false }, imgart_turbo_int8: { int8: true } } as const;

/** GPU working set on top of the weights (activations at 2K, the VAE decode at 2K), for the fits-beside estimate. */
const WORKING_BYTES = 8 * 2 ** 30;

export function krea2ProfileEntry(profile: keyof typeof KREA2_PROFILES, dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry {
  const { int8 } = KREA2_PROFILES[profile];
  const source = new WeightsSource(
    {
      profile,
      model: `Krea 2 Turbo, ${int8 ? 'int8 DiT linears' : '16-bit weights'},`,
      demoModel: 'a tiny random Krea 2 Turbo checkpoint',
      demoResult: 'the pictures are noise',
      demoWhen: 'the first imgart_turbo job',
      workingBytes: WORKING_BYTES,
      estimateBytes: (w) => {
        if (w.state !== 'real') return 64 * 2 ** 20;
        return safetensorsBytes(componentPath(w, 'transformer', 'transformer')) * (int8 ? 0.5 : 1) + safetensorsBytes(componentPath(w, 'text_encoder', '')) + safetensorsBytes(componentPath(w, 'vae', 'vae'));
      },
    },
    dirs,
  );
  return {
    kind: 'image',
    profile,
    // the capability table's entry (its steps.min: what the model's schedule runs)
    accepts: acceptsFor(capabilitiesOf('image', profile)!),
    weights: () => source.state(),
    note: () => source.note(),
    residentBytes: () => source.residentBytes(),
    // the released file is single_mmdit_large_wide's (its config is read off its shapes at load: the same sizes)
    lora: () => (source.state() === 'real' ? RELEASED_LORA_MODEL : DEMO_LORA_MODEL),
    create: () => {
      const pipeline = new Krea2Pipeline({
        int8,
        engine: () => holder.get(),
        layout: (e) =>
          source.choose(e, {
            real: (w) => ({
              ...krea2Layout(componentPath(w, 'transformer', 'transformer'), componentPath(w, 'text_encoder', ''), componentPath(w, 'vae', 'vae')),
              tokenizer: join(projectRoot(), QWEN3_VL_TOKENIZER_DIR), // read where the text encoder is one file (ComfyUI's)
            }),
            demo: (root) => krea2DemoLayout(root),
            plan: planDemoKrea2,
          }),
        onLoaded: (bytes, layout) => {
          source.loaded(bytes);
          log?.info({ layout, profile, gpu_bytes: bytes }, 'image model loaded');
        },
      });
      return withTaskLoras(taskPipeline(pipeline, 'image', krea2TaskOf), () => pipeline.loraTarget());
    },
  };
}

const RELEASED_LORA_MODEL = krea2LoraModel(parseKrea2Config(KREA2_LARGE_WIDE));
const DEMO_LORA_MODEL = krea2LoraModel(parseKrea2Config(DEMO_KREA2_DIT));

/** imgart_turbo and imgart_turbo_int8. */
export function krea2ProfileEntries(dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry[] {
  return (Object.keys(KREA2_PROFILES) as (keyof typeof KREA2_PROFILES)[]).map((p) => krea2ProfileEntry(p, dirs, holder, log));
}
