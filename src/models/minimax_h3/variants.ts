// The model's variants, one for each of the six video profiles (a profile is the service's name; the variant is what it
// means to this model): which transformer weights each one loads (manifest checkpoint /
// variant in weights/minimax-h3.json), its default steps (src/catalog is the one source), whether its
// linears are int8, which turbo adapter is merged in, and whether the sampler caches steps. The pipeline reads the
// table and calls loadH3Transformer(); everything else (text encoder, VAEs) is the same for all six.
//
// Steps count what the profile's weights were made for (sigmas.ts H3StepCount): the base release's sigma grid points
// (upstream's num_inference_steps: S steps, S - 1 forwards), the distilled weights' model evaluations (N steps, N
// forwards on the grid linspace(1, 0, N + 1) shifted per modality). See docs/models/minimax-h3.md "Steps per profile".
import type { Engine } from '../../engine/engine';
import { VIDEO_PROFILES, type VideoProfileName } from '../../catalog';
import type { ComputeDType } from '../common/weights';
import type { H3Config } from './transformer/config';
import { MiniMaxH3Transformer, type H3LoadOptions } from './transformer/transformer';
import { mergeAdapter, openH3Adapter } from './transformer/adapter';
import { openH3Weights, RELEASED_H3_CONFIG, type QkvRows } from './transformer/native-checkpoint';
import { h3StepPlan, VIDEO_SHIFT, type H3StepCount, type H3StepPlan } from './sampler/sigmas';
import { SOL_STEP_CACHE, type StepCachePolicy } from './sampler/step-cache';

/** The catalog's video profiles (its capability table writes their names once): this table has a row for each. */
export type H3ProfileName = VideoProfileName;

/** The turbo adapters of weights/minimax-h3.json (checkpoint minimax-h3-turbo), by manifest component. */
export type H3AdapterComponent = 'adapter_8step' | 'adapter_4step';
/** The Ref2VA step-distillation adapters (the same checkpoint), merged into transformer_ref/ for reference jobs. */
export type H3RefAdapterComponent = 'ref_adapter_8step' | 'ref_adapter_4step';

/** How a profile runs reference jobs (image_mode reference, voices): on the base release's Ref2VA DiT
 * (transformer_ref/, the only published Ref2VA weights), with the published Ref2VA step-distillation adapter merged
 * in where the profile is distilled, sampled at that adapter's video shift (audio: 3 throughout). */
export interface H3ReferenceRun {
  adapter: H3RefAdapterComponent | null;
  videoShift: number;
}

/** The base release: no adapter, the release's own schedule (shift 12). */
const BASE_REFERENCES: H3ReferenceRun = { adapter: null, videoShift: VIDEO_SHIFT };
/** The Ref2V 8-step v1.0 768p adapter: 8 evaluations; its shift is not published, 6 as every v1.0 768p turbo adapter
 * of the same release (h3-conditioning.md 6: FL2VA 4- and 8-step v1.0 768p run 6 / 3). */
const REF_8STEP: H3ReferenceRun = { adapter: 'ref_adapter_8step', videoShift: 6 };
/** The Ref2VA 4-step v0.1 adapter (544p): 4 evaluations at shifts 12 / 3, as its card gives. */
const REF_4STEP: H3ReferenceRun = { adapter: 'ref_adapter_4step', videoShift: VIDEO_SHIFT };

export interface H3Variant {
  name: H3ProfileName;
  /** Default steps (the catalog's default_steps), counted as stepCount says. */
  steps: number;
  /** What `steps` counts: grid points (the base release) or model evaluations (distilled weights). */
  stepCount: H3StepCount;
  /** Manifest checkpoint of the DiT in the preferred variant ('minimax-h3' = the official 50-step release). */
  transformerCheckpoint: 'minimax-h3' | 'minimax-h3-8step';
  /** Linear weights of the block stack, refiner, AdaLN and context embedder: int8 per output channel, or 16-bit. */
  weights: 'int8' | '16-bit';
  /** Turbo adapter merged into the weights at load (before int8 quantisation), or none. */
  adapter: H3AdapterComponent | null;
  /** Step caching in the sampler (basevid50_sol), or none: pass to sampleH3 as `stepCache`. */
  stepCache: StepCachePolicy | null;
  /** How its reference jobs run (every profile runs them: docs/models/minimax-h3.md "References on every profile"). */
  references: H3ReferenceRun;
  note: string;
}

function catalogSteps(name: H3ProfileName): number {
  const p = VIDEO_PROFILES.find((v) => v.profile === name);
  if (!p) throw new Error(`the catalog has no video profile ${name}`);
  return p.default_steps;
}

const row = (name: H3ProfileName, r: Omit<H3Variant, 'name' | 'steps'>): H3Variant => ({ name, steps: catalogSteps(name), ...r });

export const H3_VARIANTS: Readonly<Record<H3ProfileName, H3Variant>> = {
  basevid50: row('basevid50', { stepCount: 'grid-points', transformerCheckpoint: 'minimax-h3', weights: '16-bit', adapter: null, stepCache: null, references: BASE_REFERENCES, note: 'the official release as the diffusers pipeline runs it: 50 grid points, 49 forwards' }),
  basevid50_sol: row('basevid50_sol', {
    stepCount: 'grid-points',
    transformerCheckpoint: 'minimax-h3',
    weights: '16-bit',
    adapter: null,
    stepCache: SOL_STEP_CACHE,
    references: BASE_REFERENCES,
    note: 'basevid50 with velocity reuse between adjacent steps where the velocity barely changes (step-cache.ts)',
  }),
  fastvid: row('fastvid', { stepCount: 'evaluations', transformerCheckpoint: 'minimax-h3-8step', weights: '16-bit', adapter: null, stepCache: null, references: REF_8STEP, note: '8-step distilled DiT (spec default): 8 forwards' }),
  turbo_int8: row('turbo_int8', { stepCount: 'evaluations', transformerCheckpoint: 'minimax-h3', weights: 'int8', adapter: 'adapter_8step', stepCache: null, references: REF_8STEP, note: 'base DiT + the 8-step turbo adapter merged at load, then int8: 8 forwards' }),
  fastvid_4step_int8: row('fastvid_4step_int8', { stepCount: 'evaluations', transformerCheckpoint: 'minimax-h3', weights: 'int8', adapter: 'adapter_4step', stepCache: null, references: REF_4STEP, note: 'base DiT + the 4-step turbo adapter merged at load, then int8: 4 forwards' }),
  fastvid_fast: row('fastvid_fast', { stepCount: 'evaluations', transformerCheckpoint: 'minimax-h3-8step', weights: '16-bit', adapter: null, stepCache: null, references: REF_8STEP, note: "fastvid's distilled weights at 6 forwards instead of 8" }),
};

/** The six, in this table's order. */
export const H3_PROFILE_NAMES = Object.keys(H3_VARIANTS) as readonly H3ProfileName[];

export function h3Variant(name: string): H3Variant {
  if (!(H3_PROFILE_NAMES as readonly string[]).includes(name)) throw new RangeError(`unknown MiniMax H3 profile ${JSON.stringify(name)} (have ${H3_PROFILE_NAMES.join(', ')})`);
  return H3_VARIANTS[name as H3ProfileName];
}

/** How `steps` runs on a profile (grid points, forwards, the progress offset); the shift never merges grid points at
 * these counts (a test checks it). */
export function h3VariantSteps(profile: H3Variant | H3ProfileName, steps: number): H3StepPlan {
  const p = typeof profile === 'string' ? h3Variant(profile) : profile;
  return h3StepPlan(p.stepCount, steps);
}

/** The two DiT partitions of the release: FL2VA (`transformer/`: text and keyframes) and Ref2VA (`transformer_ref/`:
 * references), the same architecture and config with other weights (h3-conditioning.md 2). */
export type H3Partition = 'fl2va' | 'ref2va';

/** Where a profile's transformer comes from, as paths (tests, demo checkpoints, or the real weights' files, which the
 * worker resolves from the weights manifest: src/worker/profiles/video.ts h3TransformerFiles). */
export interface H3TransformerFiles {
  /** A diffusers transformer/ folder (config.json + index or single file), a native folder, or one .safetensors file. */
  transformer: string;
  /** The Ref2VA partition in either published layout (diffusers `transformer_ref/`, native `Ref2VA/transformer/`),
   * for reference jobs on the profiles with `ref2va`; absent where the weights have none. */
  transformerRef?: string;
  /** The turbo adapter's .safetensors file (required by profiles with an adapter). */
  adapter?: string;
  /** The Ref2VA adapter's .safetensors file (required for reference jobs by profiles whose references name one). */
  refAdapter?: string;
}

export interface LoadH3Options {
  /** Compute dtype (default f16; f32 for CPU-like debugging). */
  dtype?: ComputeDType;
  /** Hyper-parameters when the weights carry no config.json (the int8 single-file builds): default RELEASED_H3_CONFIG. */
  config?: H3Config;
  /** Overrides the profile's int8 choice (tests). */
  int8?: boolean;
  /** Key prefix of the transformer tensors (fixtures: "weight."). */
  prefix?: string;
  /** Row order of fused qkv_proj tensors in native-format weights (default: by source, native-checkpoint.ts). */
  qkvRows?: QkvRows;
  /** Row order of a fused qkv_proj adapter's up matrix (default 'stacked', as the ComfyUI-keyed turbo files). */
  adapterQkvRows?: QkvRows;
  /** Multiplier of the adapter's delta (default 1, as the turbo adapters are meant to be used). */
  adapterStrength?: number;
  /** The blocks' adaln_proj weights in host memory, streamed per table build (default for int8), or resident
   * (default for 16-bit): H3LoadOptions. */
  adalnWeights?: H3LoadOptions['adalnWeights'];
  /** Where the blocks go as they load (the pipeline's residency policy): H3LoadOptions. */
  blocks?: H3LoadOptions['blocks'];
}

/**
 * Loads the transformer of `profile`: the diffusers or native checkpoint format (native-checkpoint.ts), the profile's adapter merged
 * into the weights (adapter.ts), then int8 per output channel if the profile is int8.
 */
export async function loadH3Transformer(e: Engine, profile: H3Variant | H3ProfileName, files: H3TransformerFiles, opts: LoadH3Options & { partition?: H3Partition } = {}): Promise<MiniMaxH3Transformer> {
  const p = typeof profile === 'string' ? h3Variant(profile) : profile;
  const ref = opts.partition === 'ref2va';
  if (ref && !files.transformerRef) throw new RangeError(`profile ${p.name}: no Ref2VA transformer (transformer_ref/) in these weights, so reference pictures cannot run; npm run weights -- pull ${p.name} fetches it`);
  // a reference job: transformer_ref/ with the profile's Ref2VA adapter (none on the base release); else the FL2VA DiT
  // with its turbo adapter
  const adapter = ref ? p.references.adapter : p.adapter;
  const adapterFile = ref ? files.refAdapter : files.adapter;
  if (adapter && !adapterFile) throw new RangeError(`profile ${p.name} merges ${adapter}${ref ? ' for reference jobs' : ''}: no adapter file given`);
  const source = await openH3Weights(ref ? files.transformerRef! : files.transformer, { prefix: opts.prefix, config: opts.config ?? RELEASED_H3_CONFIG, qkvRows: opts.qkvRows });
  try {
    const config = source.config ?? opts.config ?? RELEASED_H3_CONFIG;
    // the adapter is merged in float32 before quantisation (the low-rank product on the GPU)
    const merged = adapter ? mergeAdapter(source, await openH3Adapter(adapterFile!, config, { qkvRows: opts.adapterQkvRows }), { engine: e, strength: opts.adapterStrength }) : source;
    const int8 = opts.int8 ?? p.weights === 'int8';
    // int8 profiles aim at the spec's ~32 GB: their 13 GB of adaln_proj weights wait on the host, streamed once per
    // table build (sampler.ts builds a distilled job's tables once); 16-bit profiles keep them resident
    const load: H3LoadOptions = { dtype: opts.dtype ?? 'f16', int8, prefix: source.prefix, adalnWeights: opts.adalnWeights ?? (int8 ? 'host' : 'gpu'), blocks: opts.blocks };
    // the source presents diffusers key names whatever the stored format
    const model = await MiniMaxH3Transformer.load(e, merged.checkpoint(), { ...config, format: 'diffusers' }, load);
    model.stepCount = p.stepCount;
    model.videoShift = ref ? p.references.videoShift : VIDEO_SHIFT;
    return model;
  } finally {
    await source.close();
  }
}
