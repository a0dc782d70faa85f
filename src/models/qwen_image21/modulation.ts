// The timestep path of Qwen-Image-2.1: one modulation shared by every block.
//   sinusoid(t)  256 = [cos(1000 t * f_k), sin(1000 t * f_k)], f_k = exp(-ln(10000) k / 128)   (cos first)
//   temb         = linear_2(silu(linear_1(sinusoid)))                   time_text_embed.timestep_embedder.*
//   modulation   = modulation.1(silu(temb)) -> [scale1 | gate1 | scale2 | gate2], each dim wide
//   norm_out     scale = norm_out.linear(silu(temb))
// A block uses  x + tanh(gate1) * attn(LN(x) * (1 + scale1)),  then the same with scale2 / gate2 and the MLP. The
// gates are only ever used through tanh, so the GPU copy holds tanh(gate) (kernel below) and the blocks'
// GEMM epilogues apply it as a plain multiplier.
// Rows: with causal_condition the text/reference prefix reads the t = 0 row and the target the sampled t (upstream
// appends a t = 0 row to the batch); samples of a batch share t, so two rows serve any batch size.
import type { Engine } from '../../engine/engine';
import { Params } from '../../engine/kernels';
import { grid1d } from '../../engine/recorder';
import type { Tensor } from '../../engine/tensor';

export const TIMESTEP_DIM = 256;

/** Sinusoidal embeddings (rows, 256) of transformer timesteps (the pipeline's t / 1000), in f32 steps as upstream. */
export function timestepSinusoid(timesteps: readonly number[]): Float32Array {
  const f = Math.fround;
  const half = TIMESTEP_DIM / 2;
  const lnMax = f(-Math.log(10000));
  const freqs = Array.from({ length: half }, (_, k) => f(Math.exp(f(f(lnMax * k) / half))));
  const out = new Float32Array(timesteps.length * TIMESTEP_DIM);
  timesteps.forEach((t, r) => {
    const scaled = f(1000 * f(t));
    for (let k = 0; k < half; k++) {
      const arg = f(scaled * freqs[k]!);
      out[r * TIMESTEP_DIM + k] = Math.cos(arg);
      out[r * TIMESTEP_DIM + half + k] = Math.sin(arg);
    }
  });
  return out;
}

// out[r, c] = tanh(x[r, c]) in the gate quarters (c in [D, 2D) or [3D, 4D)), x[r, c] elsewhere. x is (R, 4D)
// contiguous. tanh of |x| > 15 is +-1 in f32; the clamp keeps exp-based tanh implementations finite.
const TANH_GATES_WGSL = /* wgsl */ `
override WG: u32 = 256u;
struct Params { n: u32, d: u32, x_off: u32, _pad: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) { return; }
  let v = f32(x[p.x_off + i]);
  let quarter = (i % (4u * p.d)) / p.d;
  out[i] = T(select(v, tanh(clamp(v, -15.0, 15.0)), quarter % 2u == 1u));
}
`;

/** (R, 4D) modulation -> the same with tanh applied to the two gate quarters. A new contiguous tensor. */
export function tanhGates(e: Engine, mod: Tensor): Tensor {
  if (mod.rank !== 2 || mod.shape[1]! % 4 !== 0 || !mod.isContiguous) throw new RangeError(`tanhGates: ${mod} must be a contiguous (R, 4D) modulation`);
  if (mod.dtype !== 'f32' && mod.dtype !== 'f16') throw new TypeError(`tanhGates: ${mod}: only f32 and f16`);
  const out = e.empty(mod.shape, mod.dtype, 'modulation (tanh gates)');
  const WG = 256;
  const kernel = e.kernels.get({ shader: 'qwen_image21_tanh_gates', dtype: mod.dtype, constants: { WG }, source: TANH_GATES_WGSL });
  const params = new Params().u32(mod.numel).u32(mod.shape[1]! / 4).u32(mod.offset).u32(0);
  e.recorder.dispatch({ kernel, bindings: [out, mod], params, workgroups: grid1d(mod.numel, WG) });
  return out;
}

/** Views of one modulation row, each (1, 1, D), ready to broadcast over (B, L, D). */
export interface ModRow {
  scale1: Tensor;
  gate1: Tensor;
  scale2: Tensor;
  gate2: Tensor;
}

/** Row r of a (R, 4D) modulation (gates already tanh'd) as four broadcastable views. */
export function modRow(mod: Tensor, r: number): ModRow {
  const D = mod.shape[1]! / 4;
  const part = (q: number) => mod.slice(0, r, r + 1).slice(1, q * D, (q + 1) * D).unsqueeze(0);
  return { scale1: part(0), gate1: part(1), scale2: part(2), gate2: part(3) };
}
