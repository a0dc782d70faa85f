// The guided flow-matching Euler loop every image model runs: at each step the model's velocity for the prompt (and,
// with CFG, for the negative prompt, combined by guide), then x <- x + dt v (eulerStep). What differs between models,
// how a pass is run and what dt is, comes in as functions; the loop, its cancellation, its frees and its progress are
// written once here (Krea 2's sampleKrea2, Qwen-Image-2.1's sampleLatents).
//
// The step itself runs in the latents' dtype with the multiply-add done in f32 inside each kernel (upstream upcasts to
// f32 for the step and casts back).
import { throwIfCancelled } from '../../common/errors';
import type { Engine } from '../../engine/engine';
import { add, mul } from '../../engine/ops/elementwise';
import type { Tensor } from '../../engine/tensor';
import { guide } from './guidance';

/** A new tensor x + dt * v (x and v: same shape and dtype). */
export function eulerStep(e: Engine, x: Tensor, v: Tensor, dt: number): Tensor {
  const scaled = mul(e, v, dt);
  const out = add(e, x, scaled);
  scaled.free();
  return out;
}

export interface GuidedEulerLoop {
  /** The initial latents; the loop owns them (freed at each step, and on a throw). */
  x: Tensor;
  steps: number;
  /** The CFG scale, used when `negative` is given. */
  cfg: number;
  /** The model's velocity at step i for the prompt; the loop frees it. */
  velocity(x: Tensor, i: number): Tensor;
  /** The same for the negative prompt (CFG); absent: one pass per step. */
  negative?: (x: Tensor, i: number) => Tensor;
  /** The Euler step size at step i (sigma[i+1] - sigma[i] on the model's schedule). */
  dt(i: number): number;
  signal?: AbortSignal;
  /** After each step (its GPU work finished): progress and the runner's safe point. */
  onStep?(done: number, total: number): Promise<void> | void;
  /** Live previews: after the steps `at` names, the denoised estimate x0 = x - sigma(i) v of that step (the loop
   * frees it after `show`). */
  denoised?: DenoisedPreview & { sigma(i: number): number };
}

/** What a pipeline does with the sampler's denoised estimates (latent-preview.ts). */
export interface DenoisedPreview {
  at(done: number): boolean;
  show(x0: Tensor, done: number): Promise<void>;
}

/** Runs the loop; returns the final latents (the caller frees them). */
export async function guidedEuler(e: Engine, o: GuidedEulerLoop): Promise<Tensor> {
  let x: Tensor | null = o.x;
  try {
    for (let i = 0; i < o.steps; i++) {
      throwIfCancelled(o.signal);
      let v = o.velocity(x, i);
      if (o.negative) v = guide(e, v, o.negative(x, i), o.cfg);
      const x0 = o.denoised?.at(i + 1) ? eulerStep(e, x, v, -o.denoised.sigma(i)) : null;
      const next = eulerStep(e, x, v, o.dt(i));
      v.free();
      x.free();
      x = next;
      await e.sync();
      if (x0) {
        try {
          await o.denoised!.show(x0, i + 1);
        } finally {
          x0.free();
        }
      }
      await o.onStep?.(i + 1, o.steps);
    }
    const out = x;
    x = null;
    return out;
  } finally {
    x?.free();
  }
}
