// The 'image' entries imgmain (int8 transformer linears) and imgmain_bf16 (16-bit): Qwen-Image-2.1 on the engine,
// from the real checkpoint in WEIGHTS_DIR when it is complete (npm run weights -- pull imgmain), else from the demo
// checkpoint put once into DEMO_WEIGHTS_DIR (shared by both profiles: same files, the int8 happens at load): the
// trained one committed under assets/demo (trained-demo.ts), or a random one where the checkout lacks it. Each part
// is read where the weights check found it (WEIGHTS_DIR, the Hugging Face cache, or, for the transformer, a ComfyUI
// diffusion_models file in ComfyUI's key names: models/qwen_image21/comfy-parts.ts).
import { join } from 'node:path';
import type { Logger } from 'pino';
import { acceptsFor, capabilitiesOf } from '../../catalog';
import type { EngineHolder } from '../../engine/engine';
import { DEMO_TRANSFORMER_CONFIG, planDemoQwenImage21 } from '../../models/qwen_image21/demo';
import { parseQwenImage21Config } from '../../models/qwen_image21/config';
import { planTrainedDemoQwenImage21, TRAINED_DEMO_GRAMMAR, TRAINED_DEMO_PATH, TRAINED_DEMO_SUGGESTION } from '../../models/qwen_image21/trained-demo';
import { projectRoot } from '../../paths';
import { QwenImage21Pipeline } from '../../models/qwen_image21/pipeline';
import { qwenImageTaskOf } from '../../models/qwen_image21/task';
import { isSingleFile } from '../../models/qwen_image21/comfy-parts';
import { qwenImage21Layout, type QwenImage21Layout } from '../../models/qwen_image21/checkpoint';
import { componentPath, componentRoot, type ProfileWeights } from '../../weights';
import type { ServedEntry } from '../registry';
import { qwenImage21LoraModel, qwenImage21LoraModelAt, qwenImage21LoraModelOfFile, withTaskLoras } from './loras';
import { safetensorsBytes, taskPipeline, WeightsSource, type WeightsDirs } from './weights-source';

/** The Qwen-Image-2.1 profiles: whether the transformer's linears are quantised to int8 at load. */
export const QWEN_IMAGE21_PROFILES = { imgmain: { int8: true }, imgmain_bf16: { int8: false } } as const;

/** GPU working set on top of the weights (prefix K/V caches, activations at 2K, VAE decode), for the fits-beside estimate. */
const WORKING_BYTES = 6 * 2 ** 30;

export function imageProfileEntry(profile: keyof typeof QWEN_IMAGE21_PROFILES, dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry {
  const { int8 } = QWEN_IMAGE21_PROFILES[profile];
  // the trained demo (assets/demo) when the checkout has it, else a random one of the same architecture
  const trained = planTrainedDemoQwenImage21(join(projectRoot(), TRAINED_DEMO_PATH));
  const source = new WeightsSource(
    {
      profile,
      model: `Qwen-Image-2.1, ${int8 ? 'int8 transformer linears' : '16-bit weights'},`,
      demoModel: trained ? 'a tiny Qwen-Image-2.1 checkpoint trained on procedural pictures' : 'a tiny random Qwen-Image-2.1 checkpoint',
      demoResult: trained
        ? `trained to draw "${TRAINED_DEMO_GRAMMAR}" (colors red, green, blue, yellow, white, black, orange, purple; shapes circle, square, triangle; positions center, left, right, top, bottom) at 256x256 and 512x512: the shape, its color and place, and the background follow the prompt (23 of 24 shapes and 24 of 24 backgrounds in the test; docs/models/demo.md)`
        : 'the pictures are noise',
      demoWhen: 'the first image job',
      workingBytes: WORKING_BYTES,
      // bf16 -> f16 on the GPU; int8 halves the transformer
      estimateBytes: (w) => {
        if (w.state !== 'real') return 64 * 2 ** 20; // the demo checkpoint is a few MB
        const l = realLayout(w);
        return safetensorsBytes(l.transformer) * (int8 ? 0.5 : 1) + safetensorsBytes(l.textEncoder) + safetensorsBytes(l.vae);
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
    suggested: () => (trained && source.state() === 'demo' ? TRAINED_DEMO_SUGGESTION : undefined),
    // the transformer config of the checkpoint it would load now
    lora: () => {
      const w = source.weights();
      if (w.state === 'real') {
        const t = realLayout(w).transformer;
        return isSingleFile(t) ? qwenImage21LoraModelOfFile(t) : qwenImage21LoraModelAt(join(t, 'config.json'));
      }
      return trained ? qwenImage21LoraModelAt(join(projectRoot(), TRAINED_DEMO_PATH, 'transformer', 'config.json')) : RANDOM_DEMO_LORA_MODEL;
    },
    create: () => {
      const pipeline = new QwenImage21Pipeline({
        int8,
        engine: () => holder.get(),
        checkpoint: (e) => source.choose(e, { real: realLayout, demo: (root) => qwenImage21Layout(root), plan: async (e) => trained ?? planDemoQwenImage21(e) }),
        onLoaded: (bytes, dir) => {
          source.loaded(bytes);
          log?.info({ dir, profile, gpu_bytes: bytes }, 'image model loaded');
        },
      });
      return withTaskLoras(taskPipeline(pipeline, 'image', qwenImageTaskOf), () => pipeline.loraTarget());
    },
  };
}

/** Where each part of the real checkpoint was found (the components may sit in different places). */
export function realLayout(w: ProfileWeights): QwenImage21Layout {
  return qwenImage21Layout(componentRoot(w, 'model_index'), {
    transformer: componentPath(w, 'transformer', 'transformer'), textEncoder: componentPath(w, 'text_encoder', 'text_encoder'),
    vae: componentPath(w, 'vae', 'vae'), processor: componentPath(w, 'processor', 'processor'), scheduler: componentPath(w, 'scheduler', 'scheduler'),
  });
}

const RANDOM_DEMO_LORA_MODEL = qwenImage21LoraModel(parseQwenImage21Config(DEMO_TRANSFORMER_CONFIG));

/** imgmain and imgmain_bf16. */
export function imageProfileEntries(dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry[] {
  return (Object.keys(QWEN_IMAGE21_PROFILES) as (keyof typeof QWEN_IMAGE21_PROFILES)[]).map((p) => imageProfileEntry(p, dirs, holder, log));
}
