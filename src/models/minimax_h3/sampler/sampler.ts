// The dual-schedule sampling loop (diffusers modular_pipelines/minimax_h3 denoise.py): one transformer forward
// per step serves every row; the generated video rows step down the video schedule, the generated audio rows
// the audio one, and conditioning rows are never written (they stay at their anchor). No CFG: the released
// checkpoints are guidance-distilled.
//
// Row timesteps per step (SetTimestepsStep.build_row_timesteps): text and generated video rows at the video t,
// generated audio rows at the audio t, keyframe rows at max(video t, 0.999), audio reference rows at 1; the
// transformer gets the sorted distinct values and each row's index into them.
//
// AdaLN tables are built for a group of steps at once (up to TABLE_TIMESTEPS distinct timesteps: a distilled job's
// steps are one group): with the blocks' adaln_proj weights kept on the host (the int8 profiles), every table build
// streams them to the GPU (~13 GB at the released size), so per-step builds would move that much on every step.
import type { Engine } from '../../../engine/engine';
import { add, mul } from '../../../engine/ops/elementwise';
import { copyInto } from '../../../engine/ops/layout';
import type { DenoisedPreview } from '../../common/guided-euler';
import type { Tensor } from '../../../engine/tensor';
import { KEYFRAME_NOISE_AUG, type PackedSequence } from '../sequence/packed-sequence';
import { AUDIO_SHIFT, FlowSchedule, VIDEO_SHIFT } from './sigmas';
import { StepCache, type StepCachePolicy } from './step-cache';
import type { AdaLNTables } from '../transformer/adaln';
import type { H3Sequence, MiniMaxH3Transformer } from '../transformer/transformer';

/** Distinct timesteps of one table build: bounds the tables' GPU bytes (T x 3 rows of 6H per block; 32 timesteps
 * of the released model in f16: 310 MB for the 50 blocks). */
export const TABLE_TIMESTEPS = 32;

export interface RowTimestepPlan {
  /** Distinct row timesteps, ascending (float32 values). */
  timesteps: Float32Array;
  /** Per sequence row: index into timesteps. */
  indices: Int32Array;
}

export function rowTimestepPlan(packed: PackedSequence, videoT: number, audioT: number, conditionVideoT = Math.max(videoT, KEYFRAME_NOISE_AUG), conditionAudioT = 1): RowTimestepPlan {
  const row = new Float32Array(packed.length).fill(videoT);
  packed.videoIndices.subarray(0, packed.numConditionVideoRows).forEach((i) => (row[i] = conditionVideoT));
  packed.audioIndices.subarray(packed.numConditionAudioRows).forEach((i) => (row[i] = audioT));
  packed.audioIndices.subarray(0, packed.numConditionAudioRows).forEach((i) => (row[i] = conditionAudioT));
  const timesteps = Float32Array.from(new Set(row)).sort();
  const where = new Map(Array.from(timesteps, (t, i) => [t, i]));
  return { timesteps, indices: Int32Array.from(row, (t) => where.get(t)!) };
}

export interface H3SampleOptions {
  /** Sigma grid points per schedule, the terminal 0 included (upstream num_inference_steps): steps - 1 forwards. */
  steps: number;
  videoShift?: number;
  audioShift?: number;
  /** Explicit grids used verbatim instead of steps + shifts (a distilled checkpoint's published positions). */
  sigmas?: { video: ArrayLike<number>; audio: ArrayLike<number> };
  /** Distinct timesteps per AdaLN table build (default TABLE_TIMESTEPS; 1: a build per step). */
  tableTimesteps?: number;
  /** Reuse the last computed velocity at slowly changing steps (basevid50_sol: profile.stepCache); off by default. */
  stepCache?: StepCachePolicy | null;
  /** Called after each step's update is recorded (progress; throw to cancel). */
  onStep?: (done: number, total: number) => void | Promise<void>;
  /** Live previews: after the steps `at` names, the generated video rows' denoised estimate x0 = x + (1 - t) v
   * [generated rows, patch] f32 (freed after `show`). */
  denoised?: DenoisedPreview;
  /** Tests: each step's plan and velocities (freed after the call returns). */
  capture?: (step: number, name: string, t: Tensor, plan: RowTimestepPlan) => void;
}

/**
 * Denoises `video` [Nv, patch] and `audio` [Na, channels] (f32, packed row order, conditioning rows first) in
 * place. `text` is model.encodeText's output, `sequence` model.prepare(packed)'s.
 */
export interface H3SampleResult {
  /** Transformer forwards run (steps minus the reused ones). */
  forwards: number;
  /** Steps that reused the previous velocity (stepCache). */
  reused: number[];
  /** stepCache: the per-step relative L1 change of the velocity at each computed step after the first. */
  changes: number[];
}

export async function sampleH3(e: Engine, model: MiniMaxH3Transformer, sequence: H3Sequence, text: Tensor, video: Tensor, audio: Tensor, opts: H3SampleOptions): Promise<H3SampleResult> {
  const vs = opts.sigmas ? FlowSchedule.fromSigmas(opts.sigmas.video) : new FlowSchedule(opts.steps, opts.videoShift ?? VIDEO_SHIFT);
  const as = opts.sigmas ? FlowSchedule.fromSigmas(opts.sigmas.audio) : new FlowSchedule(opts.steps, opts.audioShift ?? AUDIO_SHIFT);
  if (vs.length !== as.length) throw new RangeError(`sampleH3: the video (${vs.length}) and audio (${as.length}) schedules have different lengths`);
  const { packed } = sequence;
  const nc = packed.numConditionVideoRows;
  const nca = packed.numConditionAudioRows;
  const nv = video.shape[0]!;
  const na = audio.shape[0]!;
  const cache = opts.stepCache ? new StepCache(opts.stepCache, vs.length) : null;
  const plans = Array.from({ length: vs.length }, (_, i) => rowTimestepPlan(packed, vs.timesteps[i]!, as.timesteps[i]!));
  const groups = tableGroups(plans, opts.tableTimesteps ?? TABLE_TIMESTEPS);
  let tables: { adaln: AdaLNTables; index: Map<number, number>; end: number } | null = null;
  try {
    for (let i = 0; i < vs.length; i++) {
      const plan = plans[i]!;
      let out: { video: Tensor; audio: Tensor };
      if (cache?.reuse(i)) out = cache.cached(e);
      else {
        if (!tables || i >= tables.end) {
          tables?.adaln.free();
          tables = null;
          const g = groups.find((x) => i < x.end)!;
          tables = { adaln: model.adaln(g.timesteps), index: new Map(Array.from(g.timesteps, (t, k) => [t, k])), end: g.end };
        }
        const index = tables.index;
        const timestepIndices = Int32Array.from(plan.indices, (k) => index.get(plan.timesteps[k]!)!);
        out = model.forward({ video, audio, text, sequence, adaln: tables.adaln, timestepIndices });
        await cache?.record(e, i, out);
      }
      if (opts.capture) {
        opts.capture(i, 'noise_pred', out.video, plan);
        opts.capture(i, 'audio_noise_pred', out.audio, plan);
      }
      const update = (s: FlowSchedule, x: Tensor, v: Tensor, from: number, to: number) => {
        if (from === to) return;
        const next = s.step(e, i, x.slice(0, from, to), v.slice(0, from, to));
        copyInto(e, next, x.slice(0, from, to));
        next.free();
      };
      let x0: Tensor | null = null;
      if (opts.denoised?.at(i + 1) && nv > nc) {
        const sv = mul(e, out.video.slice(0, nc, nv), Math.fround(1 - vs.timesteps[i]!));
        x0 = add(e, video.slice(0, nc, nv), sv);
        sv.free();
      }
      update(vs, video, out.video, nc, nv);
      update(as, audio, out.audio, nca, na);
      out.video.free();
      out.audio.free();
      if (x0) {
        try {
          await opts.denoised!.show(x0, i + 1);
        } finally {
          x0.free();
        }
      }
      await opts.onStep?.(i + 1, vs.length);
    }
    return { forwards: vs.length - (cache?.reused.length ?? 0), reused: cache ? [...cache.reused] : [], changes: cache ? [...cache.changes] : [] };
  } finally {
    tables?.adaln.free();
    cache?.free();
  }
}

/** Consecutive steps grouped so that each group's distinct row timesteps (ascending) number at most `max` (a step
 * with more than `max` alone is its own group). `end`: one past the group's last step. */
export function tableGroups(plans: readonly RowTimestepPlan[], max: number): { timesteps: Float32Array; end: number }[] {
  const groups: { timesteps: Float32Array; end: number }[] = [];
  let set = new Set<number>();
  for (let i = 0; i < plans.length; i++) {
    const next = new Set([...set, ...plans[i]!.timesteps]);
    if (set.size > 0 && next.size > max) {
      groups.push({ timesteps: Float32Array.from(set).sort(), end: i });
      set = new Set(plans[i]!.timesteps);
    } else set = next;
  }
  if (set.size > 0) groups.push({ timesteps: Float32Array.from(set).sort(), end: plans.length });
  return groups;
}
