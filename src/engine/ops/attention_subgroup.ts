// The tensor-core attention path: shaders/attention_subgroup.wgsl (Q K^T and P V on the subgroup-matrix builtins,
// the online softmax in f32 on the lanes), or the generated kernel of ./attention_subgroup_gen.ts (issue 43: O kept
// in matrix registers across key tiles, K / V double-buffered through registers, a lazy rescale). attention() takes
// it when asked (path 'subgroup', or 'auto' with KILN_SUBGROUP_MATRIX=1) for f16 with a head dim the matrix config
// divides, where the adapter has the feature (the same f16 x f16 -> f32 config and fixed subgroup size as the GEMM:
// subgroupMatrixPlan); everything else takes the flash kernel. Never timed on a GPU yet, hence opt-in.
//
// Tiles (ATTENTION_TILES): '2x32' and '1x32' are the file kernel's and its default (the first that fits); the 'g*'
// presets are the generated kernel's, taken only where named: the op's subgroup.tile, or KILN_SUBGROUP_ATTENTION_TILE
// (a generated preset that cannot take a call's head dim or fit the adapter then falls back to the file kernel's
// default; one named in the op's options is refused instead, so a bench row never times another kernel).
//
// `emulate` (tests only) compiles the same kernel with plain-WGSL builtins (ops/subgroup_matrix_emulation.ts), at
// the 16x16x16 config or a given smaller one (4x4x4 gives lavapipe's 8-lane subgroups two lanes per query row, so
// the shuffle reductions run in CI too).
import type { Engine } from '../engine';
import type { SubgroupMatrixConfig } from '../device';
import type { Params } from '../kernels';
import type { Tensor } from '../tensor';
import { subgroupMatrixPlan, tiledKernel, vectorReads } from './matmul_subgroup';
import { ATTENTION_TILES, type AttentionTile, type AttentionTileName } from './attention_tiles';
import { emulateSubgroupMatrix } from './subgroup_matrix_emulation';
import { generatedAttentionBytes, generatedAttentionProblem, generatedAttentionSource, type AttentionGenTile } from './attention_subgroup_gen';

export { ATTENTION_TILES, type AttentionTile, type AttentionTileName } from './attention_tiles';

export interface AttentionSubgroupOptions {
  /** A preset name or an explicit tile; default KILN_SUBGROUP_ATTENTION_TILE, else the file kernel's first that fits. */
  tile?: AttentionTileName | AttentionTile;
  /** Plain-WGSL stand-ins for the builtins (tests), optionally at a smaller fragment shape than 16x16x16. */
  emulate?: boolean | { M: number; N: number; K: number };
}

/** Everything attention() has checked and built, for the dispatch. */
export interface SubgroupAttention {
  q: Tensor; k: Tensor; v: Tensor; blk: Tensor; out: Tensor; params: Params; mask: number; B: number; Hq: number; Lq: number; D: number;
  /** For the meter: attention() works it out. */
  flops: number;
  /** The meter's shape label (meter.ts attentionShape). */
  label?: string;
}

export type AttentionSubgroupPlan = { config: SubgroupMatrixConfig; sg: number; tile: AttentionTile };
type Choice = AttentionSubgroupPlan | { reason: string };

/** Bytes of workgroup memory the kernel declares: KQs, Vs, Ps as f16, the scratch Ss as f32 (the generated one's: its own). */
export function attentionTileBytes(t: AttentionTile, cfg: { M: number; N: number }, D: number): number {
  if (t.fm) return generatedAttentionBytes(t as AttentionGenTile, cfg, D);
  const bq = t.nsg * cfg.M;
  const ds = D + t.pad;
  return 2 * (Math.max(bq, t.bkv) * ds + t.bkv * ds + t.nsg * cfg.M * (t.bkv + t.pad)) + 4 * t.nsg * cfg.M * (Math.max(t.bkv, D) + t.pad / 2);
}

/** The preset `name` (an unknown name is an error: a typo in KILN_SUBGROUP_ATTENTION_TILE should not pass silently). */
export function attentionTile(name: string): AttentionTile {
  const t = (ATTENTION_TILES as Record<string, AttentionTile>)[name];
  if (!t) throw new RangeError(`attention tile '${name}' unknown (KILN_SUBGROUP_ATTENTION_TILE?): one of ${Object.keys(ATTENTION_TILES).join(', ')}`);
  return t;
}

/** The config, subgroup size and tile this path would use for f16 attention with head dim D, or why it cannot. */
export function attentionSubgroupChoice(e: Engine, D: number, opts: AttentionSubgroupOptions = {}): Choice {
  const plan = subgroupMatrixPlan(e, { emulate: !!opts.emulate });
  if (!('config' in plan)) return plan;
  const config = typeof opts.emulate === 'object' ? { ...plan.config, ...opts.emulate } : plan.config;
  const { M, N, K } = config;
  const limit = e.describe().limits.maxComputeWorkgroupStorageSize;
  const asked = opts.tile ?? e.settings.subgroupAttentionTile;
  const named = typeof asked === 'string' ? attentionTile(asked) : asked;
  if (named?.fm) {
    const bytes = attentionTileBytes(named, config, D);
    const why = generatedAttentionProblem(named as AttentionGenTile, config, plan.sg, D)
      ?? (bytes > limit ? `tile ${JSON.stringify(named)} needs ${bytes} B of workgroup memory (adapter ${limit})` : null);
    if (!why) return { config, sg: plan.sg, tile: named };
    if (opts.tile) return { reason: `generated kernel: ${why}` };
    // from the environment: the file kernel's default below takes the call
  }
  const lpr = Math.max(1, plan.sg / M);
  if (D % K !== 0 || D % N !== 0 || D % lpr !== 0) return { reason: `head dim ${D} is not a multiple of the matrix config's K ${K}, N ${N} and ${lpr} lanes per row` };
  const fileTiles = (Object.values(ATTENTION_TILES) as AttentionTile[]).filter((t) => !t.fm);
  const tiles = named && !named.fm ? [named] : fileTiles;
  for (const tile of tiles) {
    const bytes = attentionTileBytes(tile, config, D);
    const fits = tile.bkv % N === 0 && tile.bkv % K === 0 && tile.bkv % lpr === 0 && tile.pad % 8 === 0 && bytes <= limit;
    if (fits) return { config, sg: plan.sg, tile };
  }
  const t = tiles[tiles.length - 1]!;
  return { reason: `no tile fits: ${JSON.stringify(t)} needs ${attentionTileBytes(t, config, D)} B of workgroup memory (adapter ${limit}), bkv a multiple of ${N}, ${K} and ${lpr}, pad of 8` };
}

const generated = new Map<string, { shader: string; source: string }>();

/** The generated kernel's name and text for these consts and tile, built once per variant. */
function generatedKernel(c: Record<string, number | boolean>, tile: AttentionTile, emulate: boolean): { shader: string; source: string } {
  const shader = `attention_subgroup_gen${emulate ? '_emulated' : ''}_${Object.entries(c).map(([k, v]) => `${k}${Number(v)}`).join('_')}_FM${tile.fm}_TH${tile.th ?? 8}`;
  let hit = generated.get(shader);
  if (!hit) {
    let source = generatedAttentionSource({
      SM_M: Number(c.SM_M), SM_N: Number(c.SM_N), SM_K: Number(c.SM_K), SG: Number(c.SG), D: Number(c.D),
      tile: tile as AttentionGenTile, VQ: Boolean(c.VQ), VK: Boolean(c.VK), VV: Boolean(c.VV),
    });
    if (emulate) source = emulateSubgroupMatrix(source, `${shader}.wgsl`);
    generated.set(shader, (hit = { shader, source }));
  }
  return hit;
}

/** Dispatches the tensor-core kernel with the plan attentionSubgroupChoice() gave attention() for this call. */
export function attentionSubgroup(e: Engine, a: SubgroupAttention, c: AttentionSubgroupPlan, emulate: boolean): void {
  const consts: Record<string, number | boolean> = {
    SM_M: c.config.M, SM_N: c.config.N, SM_K: c.config.K, SG: c.sg, NSG: c.tile.nsg, BKV: c.tile.bkv, D: a.D, PAD: c.tile.pad,
    VQ: vectorReads(a.q, 3, a.D), VK: vectorReads(a.k, 3, a.D), VV: vectorReads(a.v, 3, a.D),
  };
  const { shader, source } = c.tile.fm ? generatedKernel(consts, c.tile, emulate) : tiledKernel('attention_subgroup', consts, emulate);
  const kernel = e.kernels.get({ shader, entry: 'attention', dtype: a.out.dtype, source, constants: { MASK: a.mask } });
  e.recorder.dispatch({
    kernel,
    bindings: [a.out, a.q, a.k, a.v, a.blk],
    params: a.params,
    workgroups: [Math.ceil(a.Lq / (c.tile.nsg * (c.tile.fm ?? 1) * c.config.M)), a.Hq, a.B],
    flops: a.flops,
    rate: 'attention',
    shape: a.label,
  });
}
