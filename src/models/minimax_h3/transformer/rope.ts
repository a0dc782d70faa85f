// H3's 3-axis RoPE tables and the sinusoidal timestep embedding, on the CPU in the same float32 steps as
// upstream (diffusers MiniMaxH3RotaryPosEmbed, get_timestep_embedding), so the tables match to an ulp of cos/sin.
//
// RoPE: one inv_freq ladder of F = rope_freq_dim values, shared by the t, h and w axes. Pair j < 3F takes axis
// floor(j / F) and frequency j % F; the rotate-half convention rotates dims j and j + 3F, i.e. the first 6F of
// the head dims (96 of 128), the rest pass through. Positions (float64) are rounded to float32 first, and the
// angle pos * inv_freq is a float32 product, as upstream: at positions in the thousands that rounding is larger
// than the f32 tolerance, so a float64 angle would not reproduce the model.
import type { RopeTable } from '../../../engine/rope-tables';

const f = Math.fround;

/** inv_freq[k] = 1 / theta^(2k / 2F) in float32 (arange / 2F, pow, reciprocal: each rounded). */
export function h3InvFreq(ropeFreqDim: number, theta: number): Float32Array {
  return Float32Array.from({ length: ropeFreqDim }, (_, k) => f(1 / f(Math.pow(theta, f((2 * k) / (2 * ropeFreqDim))))));
}

/** cos/sin [L, 3F] for positions [L, 3] (float64, row-major): angle = f32(f32(pos_axis) * inv_freq[k]). */
export function h3RopeTable(positions: Float64Array, invFreq: Float32Array): RopeTable {
  const F = invFreq.length;
  const length = positions.length / 3;
  if (!Number.isInteger(length)) throw new RangeError(`h3RopeTable: ${positions.length} position values are not rows of (t, h, w)`);
  const pairs = 3 * F;
  const cos = new Float32Array(length * pairs);
  const sin = new Float32Array(length * pairs);
  for (let l = 0; l < length; l++) {
    for (let axis = 0; axis < 3; axis++) {
      const p = f(positions[l * 3 + axis]!);
      for (let k = 0; k < F; k++) {
        const a = f(p * invFreq[k]!);
        cos[l * pairs + axis * F + k] = Math.cos(a);
        sin[l * pairs + axis * F + k] = Math.sin(a);
      }
    }
  }
  return { length, pairs, cos, sin };
}

/**
 * Sinusoidal embedding of timesteps in [0, 1] (unscaled; t = 1 is clean): [cos(t * w_k), sin(t * w_k)] with
 * w_k = exp(-ln(10000) * k / (dim / 2)) (flip_sin_to_cos, downscale_freq_shift 0). Returns [T, dim] row-major f32.
 */
export function timestepEmbedding(timesteps: ArrayLike<number>, dim: number, maxPeriod = 10000): Float32Array {
  const half = dim / 2;
  const lnP = f(-Math.log(maxPeriod));
  const freqs = Float32Array.from({ length: half }, (_, k) => f(Math.exp(f(f(lnP * k) / half))));
  const out = new Float32Array(timesteps.length * dim);
  for (let i = 0; i < timesteps.length; i++) {
    const t = f(timesteps[i]!);
    for (let k = 0; k < half; k++) {
      const a = f(t * freqs[k]!);
      out[i * dim + k] = Math.cos(a);
      out[i * dim + half + k] = Math.sin(a);
    }
  }
  return out;
}
