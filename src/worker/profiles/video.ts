// The six 'video' entries: MiniMax H3 on the engine, one per profile of src/models/minimax_h3/variants.ts, from the
// real checkpoints in WEIGHTS_DIR when the profile's variant is complete (npm run weights -- pull <profile>), else
// from the demo checkpoint put once into DEMO_WEIGHTS_DIR (all six share it): the trained one committed under
// assets/demo (trained-demo.ts), or a random one where the checkout lacks it or DEMO_VIDEO is random.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { acceptsFor, capabilitiesOf } from '../../catalog';
import type { Engine, EngineHolder } from '../../engine/engine';
import { DEMO_ADAPTERS, DEMO_REF_ADAPTERS, planDemoH3 } from '../../models/minimax_h3/demo';
import type { TrainedDemoPlan } from '../../models/common/trained-demo';
import { planTrainedDemoH3, TRAINED_H3_DEMO_GRAMMAR, TRAINED_H3_DEMO_PATH, TRAINED_H3_DEMO_SUGGESTION } from '../../models/minimax_h3/trained-demo';
import { projectRoot } from '../../paths';
import { h3DirsFromRoot, h3TaskOf, MiniMaxH3Pipeline, type H3Dirs, type H3PipelineOptions, type H3Task } from '../../models/minimax_h3/pipeline';
import { H3_PROFILE_NAMES, h3Variant, loadH3Transformer, type H3Variant, type H3TransformerFiles } from '../../models/minimax_h3/variants';
import { componentRoot, type ProfileWeights } from '../../weights';
import { removeQuietly, tempSibling } from '../../media/files';
import type { Pipeline } from '../../models/common/pipeline';
import type { WorkerTask } from '../protocol';
import type { ServedEntry } from '../registry';
import { newSpeechPipeline, speechWeightsSource } from './speech';
import { h3LoraModel, withTaskLoras } from './loras';
import { DEMO_TRANSFORMER_CONFIG } from '../../models/minimax_h3/demo';
import { RELEASED_H3_TRANSFORMER } from '../../models/minimax_h3/released';
import { parseH3Config } from '../../models/minimax_h3/transformer/config';
import type { LoraModel } from '../../catalog';
import { speaks, spokenTrack, type SpeechFactory, type SpokenTrackOptions } from './video-speech';
import { safetensorsBytes, WeightsSource, type WeightsDirs } from './weights-source';

/** GPU working set on top of the weights (activations of a 768p 10 s step, one VAE tile, the audio chunk), for the
 * fits-beside estimate. A guess until bench:video measures it at the real size. */
const WORKING_BYTES = 8 * 2 ** 30;

/** The video pipeline behind the protocol's task: a tts_text task speaks first (inside the pipeline's text stage)
 * through `speech`, into a temp wav beside the output that is removed when the task ends. */
export function videoTaskPipeline(inner: Pipeline<H3Task>, speech: SpeechFactory, o: SpokenTrackOptions = {}): Pipeline<WorkerTask> {
  return {
    // the coming task's size places the DiT's blocks (its speech aside: only frames and size count)
    load: (ctx, next) => inner.load(ctx, next?.kind === 'video' ? h3TaskOf(next) : undefined),
    prepare: async (ctx, next) => {
      if (next.kind === 'video') await inner.prepare?.(ctx, h3TaskOf(next));
    },
    run: async (task, ctx) => {
      if (task.kind !== 'video') throw new Error(`a video pipeline was given a ${task.kind} task`);
      if (!speaks(task)) return inner.run(h3TaskOf(task), ctx);
      const wav = tempSibling(task.output);
      try {
        await inner.run(h3TaskOf(task, spokenTrack(task, speech, wav, o)), ctx);
      } finally {
        await removeQuietly(wav);
      }
    },
    unload: () => inner.unload(),
  };
}

/** The trained demo (assets/demo) when the checkout has it and DEMO_VIDEO is not random; undefined: the random one of
 * the same architecture. Its plan reads and hashes every committed file, so the six entries share one. */
function trainedDemoFor(dirs: WeightsDirs): TrainedDemoPlan | undefined {
  return dirs.demoVideo === 'random' ? undefined : planTrainedDemoH3(join(projectRoot(), TRAINED_H3_DEMO_PATH));
}

export function videoProfileEntry(profileName: string, dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>,
  trained = trainedDemoFor(dirs)): ServedEntry {
  const profile = h3Variant(profileName);
  const source = new WeightsSource(
    {
      profile: profile.name,
      model: 'MiniMax H3',
      demoModel: trained ? 'a tiny MiniMax H3 checkpoint trained on procedural clips' : 'a tiny random MiniMax H3 checkpoint',
      demoResult: trained
        ? `trained to make "${TRAINED_H3_DEMO_GRAMMAR}" (colors red, green, blue, yellow, white, black, orange, purple) as 1 s clips at 352p 16:9: the ball's color, its direction and the background follow the prompt, and the soundtrack is a tone of about 1,200 Hz (high) or 320 Hz (low) (docs/models/demo.md)`
        : 'the video and its sound are noise',
      demoWhen: 'the first video job',
      workingBytes: WORKING_BYTES,
      estimateBytes,
    },
    dirs,
  );
  // tts_text speaks with the tts profile's weights (real when pulled, else its demo checkpoint)
  const speechSource = speechWeightsSource(dirs);
  return {
    kind: 'video',
    profile: profile.name,
    // the capability table's entry, with what only this worker knows: whether the profile has the Ref2VA weights that
    // reference pictures (image_mode reference) and voices (audio_mode voice) run on
    // (read at each hello: a pull that completes a +ref2va variant shows at the next worker start)
    get accepts() {
      return acceptsFor(capabilitiesOf('video', profile.name)!, { ref2va: referenceWeights(profile, source.profileWeights()) });
    },
    weights: () => source.state(),
    note: () => source.note(),
    residentBytes: () => source.residentBytes(),
    suggested: () => (trained && source.state() === 'demo' ? TRAINED_H3_DEMO_SUGGESTION : undefined),
    // the DiT's LoRA-module sizes for the weights it would load now (the API checks a LoRA file against them)
    lora: () => (source.state() === 'real' ? RELEASED_LORA_MODEL : trained ? trainedDemoLoraModel() : RANDOM_DEMO_LORA_MODEL),
    create: () => {
      const pipeline = h3ProfilePipeline(profile, {
        engine: () => holder.get(),
        // the real variant's folders and transformer files, or the demo checkpoint's (decided at load time)
        locate: (e) =>
          source.choose(e, {
            real: (w) => ({ dirs: realDirs(profile, w), files: h3TransformerFiles(profile, w) }),
            demo: (root) => ({ dirs: h3DirsFromRoot(root), files: h3RootFiles(profile, root) }),
            plan: async (e) => trained ?? planDemoH3(e),
          }),
        onLoaded: (bytes, loaded) => {
          source.loaded(bytes);
          log?.info({ profile: profile.name, transformer: loaded.transformer, gpu_bytes: bytes }, 'video model loaded');
        },
      });
      const run = videoTaskPipeline(pipeline, ({ onAudio }) => newSpeechPipeline(speechSource, holder, { log, onAudio }));
      // a job's LoRAs beside the DiT it runs on (a reference job's: the Ref2VA partition), off again after the run
      return withTaskLoras(run, (task, ctx) => {
        if (task.kind !== 'video') throw new Error(`a video pipeline was given a ${task.kind} task`);
        return pipeline.loraTarget(ctx, h3TaskOf(task));
      });
    },
  };
}

/** Every real variant has the released DiT's sizes (the int8 builds and the 8-step checkpoint too). */
const RELEASED_LORA_MODEL: LoraModel = h3LoraModel(parseH3Config(RELEASED_H3_TRANSFORMER, 'the released transformer config'));
const RANDOM_DEMO_LORA_MODEL: LoraModel = h3LoraModel(parseH3Config(DEMO_TRANSFORMER_CONFIG, 'the demo transformer config'));
let trainedLora: LoraModel | undefined;
/** The trained demo's DiT (assets/demo), read once. */
function trainedDemoLoraModel(): LoraModel {
  if (!trainedLora) {
    const f = join(projectRoot(), TRAINED_H3_DEMO_PATH, 'transformer', 'config.json');
    trainedLora = h3LoraModel(parseH3Config(JSON.parse(readFileSync(f, 'utf8')), f));
  }
  return trainedLora;
}

/** A profile's MiniMax H3 pipeline over the folders `locate` gives (the worker's weights, a plan's checkpoint in
 * src/plan): the variant's transformer loader (adapter merge, int8), int8 text encoder and step cache. */
export function h3ProfilePipeline(profile: H3Variant, o: {
  engine(): Promise<Engine>;
  locate(e: Engine): Promise<{ dirs: H3Dirs; files: H3TransformerFiles }>;
  onLoaded?: H3PipelineOptions['onLoaded'];
} & Pick<H3PipelineOptions, 'memoryBudgetBytes' | 'textResidency' | 'blockOffload' | 'textLayers' | 'onResidency'>): MiniMaxH3Pipeline {
  let files: H3TransformerFiles | undefined;
  return new MiniMaxH3Pipeline({
    engine: o.engine,
    dirs: async (e) => {
      const found = await o.locate(e);
      files = found.files;
      return found.dirs;
    },
    loadTransformer: (e, _dirs, l) => loadH3Transformer(e, profile, files!, { dtype: l.dtype, partition: l.partition, blocks: l.blocks }),
    textEncoderInt8: profile.weights === 'int8',
    sampler: profile.stepCache ? { stepCache: profile.stepCache } : undefined,
    onLoaded: o.onLoaded,
    memoryBudgetBytes: o.memoryBudgetBytes,
    textResidency: o.textResidency,
    blockOffload: o.blockOffload,
    textLayers: o.textLayers,
    onResidency: o.onResidency,
  });
}

/** The transformer files of a checkpoint root in the diffusers layout with the turbo and Ref2VA adapters where the demo
 * keeps them (DEMO_ADAPTERS, DEMO_REF_ADAPTERS): the demo checkpoint and a plan's. */
export function h3RootFiles(profile: H3Variant, root: string): H3TransformerFiles {
  const refAdapter = profile.references.adapter;
  return {
    transformer: join(root, 'transformer'), transformerRef: join(root, 'transformer_ref'),
    adapter: profile.adapter ? join(root, DEMO_ADAPTERS[profile.adapter]) : undefined,
    refAdapter: refAdapter ? join(root, DEMO_REF_ADAPTERS[refAdapter]) : undefined,
  };
}

/** The transformer and adapter paths of the variant ProfileWeights chose (checkProfile). */
export function h3TransformerFiles(profile: H3Variant, w: ProfileWeights): H3TransformerFiles {
  const comp = w.variant.components.transformer;
  if (!comp) throw new RangeError(`profile ${w.profile} variant ${w.variant.name} has no transformer component`);
  // by-hand single files (the int8 builds) are listed among the component's files; the diffusers folder is transformer/
  const single = comp.files.find((f) => f.path.startsWith('transformer/') && f.path.endsWith('.safetensors') && !f.path.includes('diffusion_pytorch_model'));
  // a file found in ComfyUI's diffusion_models/ (comp.file) is the whole DiT
  const transformer = comp.file ?? (single && comp.checkpoint === 'minimax-h3-int8' ? single.abs : join(comp.root, 'transformer'));
  // the Ref2VA partition where the variant has it (the base release's first variant: transformer_ref/ beside transformer/)
  const ref = w.variant.components.transformer_ref;
  const adapterFile = (component: string) => w.variant.components[component]?.files.find((f) => f.path.endsWith('.safetensors') && f.state === 'ok')?.abs;
  const files: H3TransformerFiles = ref ? { transformer, transformerRef: join(ref.root, 'transformer_ref') } : { transformer };
  // the Ref2VA adapter where the variant has it (the +ref2va variants)
  const refAdapter = profile.references.adapter ? adapterFile(profile.references.adapter) : undefined;
  if (refAdapter) files.refAdapter = refAdapter;
  if (!profile.adapter) return files;
  const adapter = adapterFile(profile.adapter);
  if (!adapter) throw new RangeError(`profile ${w.profile}: no ${profile.adapter} .safetensors file in variant ${w.variant.name}`);
  return { ...files, adapter };
}

/** Whether the weights a profile runs on have what its reference jobs need (the runtime fact ref2va): the demo
 * checkpoint has everything; real weights need transformer_ref/ and the profile's Ref2VA adapter, else what is
 * missing, named as the 400 says it. */
export function referenceWeights(profile: H3Variant, w: ProfileWeights): true | { missing: string } {
  if (w.state !== 'real') return true;
  const files = h3TransformerFiles(profile, w);
  const lacks: string[] = [];
  if (!files.transformerRef) lacks.push('transformer_ref/ of MiniMaxAI/MiniMax-H3');
  const adapter = profile.references.adapter;
  if (adapter && !files.refAdapter) lacks.push(`the Ref2VA adapter ${adapter} (a .safetensors file in Minimax-h3-Turbo/${adapter === 'ref_adapter_8step' ? 'ref2va-8step' : 'ref2va-4step'}/ of lightx2v/Minimax-h3-Turbo)`);
  if (lacks.length === 0) return true;
  return { missing: `which these weights lack: ${lacks.join(' and ')}; npm run weights -- pull ${profile.name} fetches what the hub names (weights/minimax-h3.json)` };
}

/** The folders of a complete variant: the transformer where the profile's variant has it (the 8-step checkpoint, an
 * int8 file), every other part from its own component's checkpoint folder. */
export function realDirs(profile: H3Variant, w: ProfileWeights): H3Dirs {
  const part = (component: string, folder: string) => join(componentRoot(w, component), folder);
  const files = h3TransformerFiles(profile, w);
  return {
    transformer: files.transformer,
    ...(files.transformerRef ? { transformerRef: files.transformerRef } : {}),
    textEncoder: part('text_encoder', 'text_encoder'),
    tokenizer: part('tokenizer', 'tokenizer'),
    vae: part('vae', 'vae'),
    audioVae: part('audio_vae', 'audio_vae'),
  };
}

/** Before a first load: the transformer's and VAEs' files (int8 profiles: about half the 16-bit transformer). */
function estimateBytes(w: ProfileWeights): number {
  if (w.state !== 'real') return 256 * 2 ** 20; // the demo checkpoint is a few MB
  const profile = h3Variant(w.profile);
  const dirs = realDirs(profile, w);
  // a 16-bit folder quantised at load halves; an int8 file loads as it is
  const halves = profile.weights === 'int8' && existsSync(dirs.transformer) && statSync(dirs.transformer).isDirectory();
  return safetensorsBytes(dirs.transformer) * (halves ? 0.5 : 1) + safetensorsBytes(dirs.vae) + safetensorsBytes(dirs.audioVae);
}

/** The six video profiles. */
export function videoProfileEntries(dirs: WeightsDirs, holder: EngineHolder, log?: Pick<Logger, 'info'>): ServedEntry[] {
  const trained = trainedDemoFor(dirs);
  return H3_PROFILE_NAMES.map((name) => videoProfileEntry(name, dirs, holder, log, trained));
}
