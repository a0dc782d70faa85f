// MiniMax H3's rectified-flow Euler schedule (diffusers MiniMaxH3Scheduler), one per modality: video shift 12,
// audio shift 3 (scheduler/ and audio_scheduler/ scheduler_config.json). Conventions that differ from the usual
// flow-match scheduler, all from upstream:
//   - `steps` counts sigma grid points, the terminal 0 included: linspace(1, 0, steps) pushed through the shift
//     sigma' = s * sigma / (1 + (s - 1) * sigma), consecutive duplicates dropped; steps - 1 model evaluations;
//   - the model sees t = 1 - sigma in [0, 1], t = 1 clean;
//   - the velocity points towards the data: x0 = x_t + (1 - t) * v, then x_next = r * x_t + (1 - r) * x0 with
//     r = sigma_next / sigma (Euler, no noise re-injected).
// Everything is float32 in upstream's operation order. torch.linspace's vectorised CPU path can differ from its
// scalar formula by an ulp depending on the CPU's vector width; we use the scalar formula (start + i * step for
// the first half, end - (n - 1 - i) * step for the second), so sigmas agree with upstream to an ulp or so.
import type { Engine } from '../../../engine/engine';
import { add, mul } from '../../../engine/ops/elementwise';
import type { Tensor } from '../../../engine/tensor';

const f = Math.fround;

export const VIDEO_SHIFT = 12;
export const AUDIO_SHIFT = 3;

/**
 * What a job's `steps` counts for a set of weights (docs/models/minimax-h3.md "Steps per profile", with sources):
 *   'grid-points'  upstream's num_inference_steps: sigma grid points, the terminal 0 included, so S steps run S - 1
 *                  forwards on flowSigmas(S). The base release as the diffusers modular pipeline runs it (its docs:
 *                  "num_inference_steps counts sigma grid points, the terminal 0 included, so it drives one model
 *                  evaluation less"; 50 points = 49 forwards).
 *   'evaluations'  model evaluations (NFE), as distilled checkpoints are trained and published: N steps run N forwards
 *                  on flowSigmas(N + 1), i.e. q_i = (N - i) / N then 0, shifted per modality (the LightX2V / ModelTC
 *                  Turbo cards and inference_minimax_h3.py, which passes num_inference_steps = N + 1).
 */
export type H3StepCount = 'grid-points' | 'evaluations';

export interface H3StepPlan {
  /** Sigma grid points per schedule (the sampler's `steps`). */
  gridPoints: number;
  /** Transformer forwards. */
  forwards: number;
  /** Added to the forwards done for the job's progress, so that progress ends at the `steps` asked for: 1 for a
   * grid-points count (the first grid point is the starting noise), else 0. */
  progressOffset: number;
}

/** How `steps` (>= 1) runs under a step count; a 1-step grid-points request is the smallest grid [1, 0]. */
export function h3StepPlan(count: H3StepCount, steps: number): H3StepPlan {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`h3StepPlan: steps ${steps} must be an integer >= 1`);
  if (count === 'evaluations') return { gridPoints: steps + 1, forwards: steps, progressOffset: 0 };
  const gridPoints = Math.max(2, steps);
  return { gridPoints, forwards: gridPoints - 1, progressOffset: steps - (gridPoints - 1) };
}

/** The shifted sigma grid: `steps` points from 1 to 0 (fewer if the shift collapses neighbours in float32). */
export function flowSigmas(steps: number, shift: number): Float32Array {
  if (!Number.isInteger(steps) || steps < 2) throw new RangeError(`flowSigmas: steps ${steps} must be an integer >= 2 (the grid includes the terminal 0)`);
  if (!(shift > 0)) throw new RangeError(`flowSigmas: shift ${shift} must be positive`);
  const step = f(-1 / (steps - 1));
  const half = Math.floor(steps / 2);
  const s = f(shift);
  const s1 = f(shift - 1);
  const out: number[] = [];
  for (let i = 0; i < steps; i++) {
    const b = i < half ? f(1 + f(step * i)) : f(0 - f(step * (steps - 1 - i)));
    const sigma = f(f(s * b) / f(1 + f(s1 * b)));
    if (out.length === 0 || out[out.length - 1] !== sigma) out.push(sigma);
  }
  return Float32Array.from(out);
}

/** Upstream's checks on an explicit grid: >= 2 values, strictly decreasing, ending at exactly 0. */
function explicitSigmas(values: ArrayLike<number>): Float32Array {
  const s = Float32Array.from(values);
  if (s.length < 2 || s.some((v, i) => !Number.isFinite(v) || (i > 0 && !(v < s[i - 1]!))) || s[s.length - 1] !== 0) {
    throw new RangeError(`FlowSchedule: sigmas [${Array.from(values).join(', ')}] must hold at least two strictly decreasing values ending at 0`);
  }
  return s;
}

export class FlowSchedule {
  readonly sigmas: Float32Array;
  /** t = 1 - sigma for every evaluated step (the terminal sigma has none). */
  readonly timesteps: Float32Array;

  /** `sigmas`: an explicit grid used verbatim (no shift), e.g. a distilled checkpoint's own positions. */
  constructor(
    readonly steps: number,
    readonly shift: number,
    sigmas?: ArrayLike<number>,
  ) {
    this.sigmas = sigmas ? explicitSigmas(sigmas) : flowSigmas(steps, shift);
    this.timesteps = this.sigmas.subarray(0, -1).map((s) => f(1 - s));
  }

  /** A schedule from a fully formed sigma list (upstream set_timesteps(sigmas=...)): float32, verbatim. */
  static fromSigmas(sigmas: ArrayLike<number>): FlowSchedule {
    return new FlowSchedule(sigmas.length, 1, sigmas);
  }

  /** Model evaluations. */
  get length(): number {
    return this.timesteps.length;
  }

  /** x_{i+1} from x_i and the velocity v at step i (new f32 tensor of x's shape; any views in). */
  step(e: Engine, i: number, x: Tensor, v: Tensor): Tensor {
    if (!(i >= 0 && i < this.length)) throw new RangeError(`FlowSchedule.step: step ${i} of ${this.length}`);
    return eulerStep(e, x, v, this.timesteps[i]!, this.sigmas[i]!, this.sigmas[i + 1]!);
  }
}

/** x0 = x + (1 - t) v; x_next = r x + (1 - r) x0 with r = sigmaNext / sigma; float32 ops in upstream's order. */
export function eulerStep(e: Engine, x: Tensor, v: Tensor, t: number, sigma: number, sigmaNext: number): Tensor {
  if (x.dtype !== 'f32' || v.dtype !== 'f32') throw new TypeError(`eulerStep: x ${x} and v ${v} must be f32`);
  const sv = mul(e, v, f(1 - f(t)));
  const x0 = add(e, x, sv);
  sv.free();
  const r = f(f(sigmaNext) / f(sigma));
  const a = mul(e, x, r);
  const b = mul(e, x0, f(1 - r));
  x0.free();
  const out = add(e, a, b);
  a.free();
  b.free();
  return out;
}
