// The timestep side of MiniMax H3, computed once per sampling step (it depends on the step's distinct timesteps
// only, never on the sequence):
//   timestepEmbedding(t) [T, freq_dim] (CPU, rope.ts) -> time_embedder: linear_1, SiLU, linear_2 -> temb [T, ted]
//   every block:  adaln_proj.linear(silu(temb)) [T, 18 H] viewed as [T * 3, 6 H]: row t * 3 + tag holds
//                 shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp of (timestep t, modality tag)
//   norm_out:     norm_out.linear(silu(temb)) [T, 2 H] = shift, scale per timestep
// The time MLP runs in f32 (the checkpoint keeps it f32); silu(temb) is taken in f32 and only then cast to the
// projections' dtype, as upstream does. In the released model the projections are 13B of the 33B parameters but
// these GEMMs have T <= 3 rows, so a step spends almost nothing here.
import type { Engine } from '../../engine/engine';
import { silu } from '../../engine/ops/activation';
import { cast } from '../../engine/ops/layout';
import type { Tensor } from '../../engine/tensor';
import type { ComputeDType } from '../qwen3/weights';
import { applyLinear, type Linear } from './blocks';
import type { H3Config } from './config';
import { timestepEmbedding } from './rope';

/** diffusers TimestepEmbedding: linear_1 (freq_dim -> hidden), SiLU, linear_2 (hidden -> time_embed_dim); f32. */
export interface TimeEmbedder {
  linear_1: Linear;
  linear_2: Linear;
}

export interface AdaLNTables {
  /** The step's distinct timesteps (float32 values, ascending as the row plan sorts them). */
  timesteps: Float32Array;
  /** temb [T, time_embed_dim], f32. */
  temb: Tensor;
  /** Per block: [T * 3, 6 H] in the compute dtype. */
  blocks: Tensor[];
  /** norm_out: [T, 2 H] (shift | scale) in the compute dtype. */
  normOut: Tensor;
  free(): void;
}

export function computeAdaLN(
  e: Engine,
  cfg: H3Config,
  m: { time_embedder: TimeEmbedder; transformer_blocks: readonly { adaln_proj: { linear: Linear } }[]; norm_out: { linear: Linear } },
  timesteps: ArrayLike<number>,
  dtype: ComputeDType,
): AdaLNTables {
  const T = timesteps.length;
  if (T < 1) throw new RangeError('computeAdaLN: no timesteps');
  const ts = Float32Array.from(timesteps);
  const proj = e.upload(timestepEmbedding(ts, cfg.freqDim), [T, cfg.freqDim], 'f32', 'timestep proj');
  const h = applyLinear(e, m.time_embedder.linear_1, proj, { act: 'silu' });
  proj.free();
  const temb = applyLinear(e, m.time_embedder.linear_2, h);
  h.free();
  const act32 = silu(e, temb);
  const act = dtype === 'f32' ? act32 : cast(e, act32, dtype);
  if (act !== act32) act32.free();
  const blocks = m.transformer_blocks.map((b) => applyLinear(e, b.adaln_proj.linear, act).reshape([T * 3, 6 * cfg.hiddenSize]));
  const normOut = applyLinear(e, m.norm_out.linear, act);
  act.free();
  return {
    timesteps: ts,
    temb,
    blocks,
    normOut,
    free() {
      temb.free();
      for (const b of blocks) b.free();
      normOut.free();
    },
  };
}
