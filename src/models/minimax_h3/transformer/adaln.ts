// The timestep side of MiniMax H3, computed once per sampling step (it depends on the step's distinct timesteps
// only, never on the sequence):
//   timestepEmbedding(t) [T, freq_dim] (CPU, rope.ts) -> time_embedder: linear_1, SiLU, linear_2 -> temb [T, ted]
//   every block:  adaln_proj.linear(silu(temb)) [T, 18 H] viewed as [T * 3, 6 H]: row t * 3 + tag holds
//                 shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp of (timestep t, modality tag)
//   norm_out:     norm_out.linear(silu(temb)) [T, 2 H] = shift, scale per timestep
// The time MLP runs in f32 (the checkpoint keeps it f32); silu(temb) is taken in f32 and only then cast to the
// projections' dtype, as upstream does. In the released model the projections are 13B of the 33B parameters but
// these GEMMs have T <= 3 rows, so a step spends almost nothing computing here.
// Blocks whose adaln_proj weight is kept on the host (HostLinear, the real model's default: 13 GB int8 / 26 GB
// 16-bit the forwards never read) are streamed: each block's bytes are written into one reused GPU buffer, its
// GEMM recorded, then the next block's bytes follow (writeBytes flushes the recorded GEMM first, so the queue
// orders them), so the GPU holds one block's projection at a time. The bytes are those the resident path uploads,
// so the tables are the same.
import type { Engine } from '../../../engine/engine';
import { silu } from '../../../engine/ops/activation';
import { cast } from '../../../engine/ops/layout';
import type { Int8Weight } from '../../../engine/ops/linear';
import type { Tensor } from '../../../engine/tensor';
import type { ComputeDType } from '../../common/weights';
import { linearAt } from '../../common/lora-linear';
import { applyLinear, isHostLinear, type AdaLNProjection, type HostLinear, type Linear } from './blocks';
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
  /** Host -> GPU bytes this call streamed (host-kept adaln_proj weights and scales); 0 when all are resident. */
  streamedBytes: number;
  free(): void;
}

/** One reused GPU home for host-kept projections of one shape and dtype (all blocks share it). */
class ProjectionStage {
  private weight: Tensor | Int8Weight | null = null;
  private key = '';
  streamedBytes = 0;

  constructor(private readonly e: Engine) {}

  /** Writes m's bytes into the stage (reallocated only if its shape or dtype differs) and returns it as a Linear. */
  load(m: HostLinear): Linear {
    const { e } = this;
    const h = m.host;
    const key = `${h.weightDtype}:${h.scaleDtype}:${h.N}x${h.K}`;
    if (key !== this.key) {
      this.free();
      this.weight = h.weightDtype === 'i8' ? { q: e.empty([h.N, h.K], 'i8', 'adaln_proj stage q'), scales: e.empty([h.N], h.scaleDtype, 'adaln_proj stage scales') } : e.empty([h.N, h.K], h.weightDtype, 'adaln_proj stage');
      this.key = key;
    }
    const w = this.weight!;
    // a plan's projection holds no bytes (blocks.ts loadHostLinearModule): the same writes, empty, count the stage's size
    const write = (t: Tensor, bytes: Uint8Array | null) => {
      e.writeBytes(t, 0, bytes ?? new Uint8Array(0));
      this.streamedBytes += bytes ? bytes.byteLength : t.numel * t.bytesPerElement;
    };
    if ('q' in w) {
      write(w.q, h.weight);
      write(w.scales, h.scales);
    } else write(w, h.weight);
    return { weight: w, bias: m.bias };
  }

  /** Safe with the GEMMs still queued: the pool orders later uses of the buffers after them. */
  free(): void {
    const w = this.weight;
    if (w && 'q' in w) {
      w.q.free();
      w.scales.free();
    } else w?.free();
    this.weight = null;
    this.key = '';
  }
}

export function computeAdaLN(
  e: Engine,
  cfg: H3Config,
  m: { time_embedder: TimeEmbedder; transformer_blocks: readonly { adaln_proj: { linear: AdaLNProjection } }[]; norm_out: { linear: Linear } },
  timesteps: ArrayLike<number>,
  dtype: ComputeDType,
  /** Runs block n's projection (block offload: its weights uploaded around it). */
  withBlock: <T>(n: number, fn: () => T) => T = (_n, fn) => fn(),
): AdaLNTables {
  const T = timesteps.length;
  if (T < 1) throw new RangeError('computeAdaLN: no timesteps');
  const ts = Float32Array.from(timesteps);
  return e.scope(() => {
    // the tables (temb, blocks, normOut) are returned and outlive the scope; the sinusoid, the hidden row, silu(temb)
    // and the stage's GPU copy are freed by it
    const temb = e.chain(
      () => e.upload(timestepEmbedding(ts, cfg.freqDim), [T, cfg.freqDim], 'f32', 'timestep proj'),
      (proj) => applyLinear(e, m.time_embedder.linear_1, proj, { act: 'silu' }),
      (h) => applyLinear(e, m.time_embedder.linear_2, h),
    );
    const act = e.chain(() => silu(e, temb), (act32) => (dtype === 'f32' ? act32 : cast(e, act32, dtype)));
    const stage = new ProjectionStage(e);
    // the stage freed with this inner scope, before norm_out's table is made
    const blocks = e.scope(() =>
      m.transformer_blocks.map((b, n) => {
        const proj = b.adaln_proj.linear;
        return withBlock(n, () => {
          if (!isHostLinear(proj)) return applyLinear(e, proj, act).reshape([T * 3, 6 * cfg.hiddenSize]);
          // the staged copy, with a job's LoRA terms on the module (attached to the HostLinear: lora-models.ts)
          const staged = stage.load(proj);
          return linearAt(e, proj, act, staged.weight, staged.bias).reshape([T * 3, 6 * cfg.hiddenSize]);
        });
      }),
    );
    const normOut = applyLinear(e, m.norm_out.linear, act);
    return tables(ts, temb, blocks, normOut, stage.streamedBytes);
  });
}

function tables(ts: Float32Array, temb: Tensor, blocks: Tensor[], normOut: Tensor, streamedBytes: number): AdaLNTables {
  return {
    timesteps: ts,
    temb,
    blocks,
    normOut,
    streamedBytes,
    free() {
      temb.free();
      for (const b of blocks) b.free();
      normOut.free();
    },
  };
}
