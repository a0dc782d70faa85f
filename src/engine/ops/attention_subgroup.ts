// The tensor-core attention path: shaders/attention_subgroup.wgsl (Q K^T and P V on the subgroup-matrix builtins,
// the online softmax in f32 on the lanes). attention() takes it when asked (path 'subgroup', or 'auto' with
// KILN_SUBGROUP_MATRIX=1) for f16 with a head dim the matrix config divides, where the adapter has the feature
// (the same f16 x f16 -> f32 config and fixed subgroup size as the GEMM: subgroupMatrixPlan); everything else
// takes the flash kernel. Never timed on a GPU yet, hence opt-in.
//
// `emulate` (tests only) compiles the same kernel with plain-WGSL builtins (ops/subgroup_matrix_emulation.ts), at
// the 16x16x16 config or a given smaller one (4x4x4 gives lavapipe's 8-lane subgroups two lanes per query row, so
// the shuffle reductions run in CI too).
import type { Engine } from '../engine';
import type { SubgroupMatrixConfig } from '../device';
import type { Params } from '../kernels';
import type { Tensor } from '../tensor';
import { subgroupMatrixPlan, tiledKernel, vectorReads } from './matmul_subgroup';

/** nsg subgroups per workgroup (each SM_M query rows), bkv keys per staged tile, staged rows padded by pad halves. */
export interface AttentionTile { nsg: number; bkv: number; pad: number }

/** Largest first; the default is the first that fits the adapter's workgroup memory at the call's head dim. */
export const ATTENTION_TILES = {
  '2x32': { nsg: 2, bkv: 32, pad: 8 },   // 36 KiB at D 128 with 16x16 fragments
  '1x32': { nsg: 1, bkv: 32, pad: 8 },   // 27 KiB: D 128 within lavapipe's 32 KiB
} as const satisfies Record<string, AttentionTile>;

export interface AttentionSubgroupOptions {
  tile?: AttentionTile;
  /** Plain-WGSL stand-ins for the builtins (tests), optionally at a smaller fragment shape than 16x16x16. */
  emulate?: boolean | { M: number; N: number; K: number };
}

/** Everything attention() has checked and built, for the dispatch. */
export interface SubgroupAttention {
  q: Tensor; k: Tensor; v: Tensor; blk: Tensor; out: Tensor; params: Params; mask: number; B: number; Hq: number; Lq: number; D: number;
  /** For the meter: attention() works it out. */
  flops: number;
}

export type AttentionSubgroupPlan = { config: SubgroupMatrixConfig; sg: number; tile: AttentionTile };
type Choice = AttentionSubgroupPlan | { reason: string };

/** Bytes of workgroup memory the kernel declares: KQs, Vs, Ps as f16, the scratch Ss as f32. */
export function attentionTileBytes(t: AttentionTile, cfg: { M: number; N: number }, D: number): number {
  const bq = t.nsg * cfg.M;
  const ds = D + t.pad;
  return 2 * (Math.max(bq, t.bkv) * ds + t.bkv * ds + t.nsg * cfg.M * (t.bkv + t.pad)) + 4 * t.nsg * cfg.M * (Math.max(t.bkv, D) + t.pad / 2);
}

/** The config, subgroup size and tile this path would use for f16 attention with head dim D, or why it cannot. */
export function attentionSubgroupChoice(e: Engine, D: number, opts: AttentionSubgroupOptions = {}): Choice {
  const plan = subgroupMatrixPlan(e, { emulate: !!opts.emulate });
  if (!('config' in plan)) return plan;
  const config = typeof opts.emulate === 'object' ? { ...plan.config, ...opts.emulate } : plan.config;
  const { M, N, K } = config;
  const lpr = Math.max(1, plan.sg / M);
  if (D % K !== 0 || D % N !== 0 || D % lpr !== 0) return { reason: `head dim ${D} is not a multiple of the matrix config's K ${K}, N ${N} and ${lpr} lanes per row` };
  const limit = e.describe().limits.maxComputeWorkgroupStorageSize;
  const tiles = opts.tile ? [opts.tile] : (Object.values(ATTENTION_TILES) as AttentionTile[]);
  for (const tile of tiles) {
    const bytes = attentionTileBytes(tile, config, D);
    const fits = tile.bkv % N === 0 && tile.bkv % K === 0 && tile.bkv % lpr === 0 && tile.pad % 8 === 0 && bytes <= limit;
    if (fits) return { config, sg: plan.sg, tile };
  }
  const t = tiles[tiles.length - 1]!;
  return { reason: `no tile fits: ${JSON.stringify(t)} needs ${attentionTileBytes(t, config, D)} B of workgroup memory (adapter ${limit}), bkv a multiple of ${N}, ${K} and ${lpr}, pad of 8` };
}

/** Dispatches the tensor-core kernel with the plan attentionSubgroupChoice() gave attention() for this call. */
export function attentionSubgroup(e: Engine, a: SubgroupAttention, c: AttentionSubgroupPlan, emulate: boolean): void {
  const consts: Record<string, number | boolean> = {
    SM_M: c.config.M, SM_N: c.config.N, SM_K: c.config.K, SG: c.sg, NSG: c.tile.nsg, BKV: c.tile.bkv, D: a.D, PAD: c.tile.pad,
    VQ: vectorReads(a.q, 3, a.D), VK: vectorReads(a.k, 3, a.D), VV: vectorReads(a.v, 3, a.D),
  };
  const { shader, source } = tiledKernel('attention_subgroup', consts, emulate);
  const kernel = e.kernels.get({ shader, entry: 'attention', dtype: a.out.dtype, source, constants: { MASK: a.mask } });
  e.recorder.dispatch({
    kernel,
    bindings: [a.out, a.q, a.k, a.v, a.blk],
    params: a.params,
    workgroups: [Math.ceil(a.Lq / (c.tile.nsg * c.config.M)), a.Hq, a.B],
    flops: a.flops,
  });
}
