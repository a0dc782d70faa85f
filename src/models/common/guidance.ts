// Classifier-free guidance as the diffusers pipelines combine the two passes: v = v_neg + scale (v_cond - v_neg).
import type { Engine } from '../../engine/engine';
import { add, mul, sub } from '../../engine/ops/elementwise';
import type { Tensor } from '../../engine/tensor';

/** The guided velocity from the conditional and negative passes (same shape); frees both inputs. */
export function guide(e: Engine, cond: Tensor, negative: Tensor, scale: number): Tensor {
  const d = sub(e, cond, negative);
  cond.free();
  const scaled = mul(e, d, scale);
  d.free();
  const out = add(e, negative, scaled);
  negative.free();
  scaled.free();
  return out;
}
