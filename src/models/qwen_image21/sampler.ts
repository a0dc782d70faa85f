// The flow-matching Euler step on the GPU: x <- x + dt * v (sigmas.ts gives dt = sigma[i+1] - sigma[i]).
// Upstream upcasts to f32 for the step and casts back to the latents' dtype; here the step runs in the latents'
// dtype with the multiply-add done in f32 inside each kernel.
import type { Engine } from '../../engine/engine';
import { add, mul } from '../../engine/ops/elementwise';
import type { Tensor } from '../../engine/tensor';

/** A new tensor x + dt * v (x and v: same shape and dtype). */
export function eulerStep(e: Engine, x: Tensor, v: Tensor, dt: number): Tensor {
  const scaled = mul(e, v, dt);
  const out = add(e, x, scaled);
  scaled.free();
  return out;
}
