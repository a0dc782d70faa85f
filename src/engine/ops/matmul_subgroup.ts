// The tensor-core GEMM path: shaders/matmul_subgroup.wgsl (f16 x f16 -> f32 through
// chromium-experimental-subgroup-matrix). matmul()/linear() use it only when asked (path 'subgroup', or 'auto' with
// KILN_SUBGROUP_MATRIX=1) for f16 activations with f16 or int8 weights (int8: staged as f16, which holds every int8
// exactly, and scaled per output channel in the epilogue), and only where the adapter has the feature, an f16/f32
// subgroup-matrix config whose M and N divide 32 and K divides 32, and one fixed subgroup size; everything else
// (lavapipe, f32, and the default) takes the register-tiled kernel.
//
// Tiles (SUBGROUP_TILES): '64' is the one-subgroup 64x64 kernel that ran correct on an H200 (2026-11-28); '128'
// (the default, KILN_SUBGROUP_TILE picks another) is 2x2 subgroups of 64x64 each, the shape fast GEMMs use,
// possible since the kernel turns off Tint's over-strict subgroup_matrix_uniformity check. Neither is timed yet:
// hence opt-in, with both rows in bench:engine.
//
// `emulate` (tests only) compiles the same kernel with the matrix builtins replaced by plain WGSL
// (ops/subgroup_matrix_emulation.ts), so lavapipe runs its staging, tiling and epilogue in CI.
import type { Engine } from '../engine';
import type { SubgroupMatrixConfig } from '../device';
import type { Params } from '../kernels';
import { gemmRate, gemmShape } from '../meter';
import type { Tensor } from '../tensor';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../paths';
import { ACT_CODE, type Activation } from './matmul';
import { emulateSubgroupMatrix } from './subgroup_matrix_emulation';
import { pipelinedGemmSource, pipelinedTileBytes } from './matmul_subgroup_gen';

export const SUBGROUP_MATRIX_FEATURE = 'chromium-experimental-subgroup-matrix';

/** A workgroup of sgm x sgn subgroups, each owning fm x fn fragments; K slices of bk, staged rows padded by pad.
 * `stages` (2) picks the generated, double-buffered kernel of ops/matmul_subgroup_gen.ts; without it, the file's. */
export interface SubgroupTile { sgm: number; sgn: number; fm: number; fn: number; bk: number; pad: number; stages?: number }

// 'db*' (issue 43): the generated double-buffered kernel, not yet timed on a GPU. Sizes for 16x16 fragments; each
// fits 48 KiB of workgroup memory (NVIDIA's Vulkan limit): db128 128x128 BK 32 (44 KiB), db128x64 128x64 BK 32
// (34 KiB), db64k64 64x64 BK 64 (40 KiB), db64 64x64 BK 32 (24 KiB: more workgroups for the medium shapes, and
// the one lavapipe's 32 KiB holds, so the sweep's rehearsal runs a generated row). None is taken by default: a tuning
// table or KILN_SUBGROUP_TILE names it.
export const SUBGROUP_TILES = {
  '64': { sgm: 1, sgn: 1, fm: 4, fn: 4, bk: 32, pad: 0 },
  '128': { sgm: 2, sgn: 2, fm: 4, fn: 4, bk: 32, pad: 8 },
  'db128': { sgm: 2, sgn: 2, fm: 4, fn: 4, bk: 32, pad: 8, stages: 2 },
  'db128x64': { sgm: 2, sgn: 2, fm: 4, fn: 2, bk: 32, pad: 8, stages: 2 },
  'db64k64': { sgm: 2, sgn: 2, fm: 2, fn: 2, bk: 64, pad: 8, stages: 2 },
  'db64': { sgm: 2, sgn: 2, fm: 2, fn: 2, bk: 32, pad: 8, stages: 2 },
} as const satisfies Record<string, SubgroupTile>;
export type SubgroupTileName = keyof typeof SUBGROUP_TILES;

export interface SubgroupOptions {
  /** A preset name or an explicit tile; default KILN_SUBGROUP_TILE, else the largest preset that fits ('128'). */
  tile?: SubgroupTileName | SubgroupTile;
  /** Plain-WGSL stand-ins for the matrix builtins (tests: the kernel's logic on adapters without the feature). */
  emulate?: boolean;
}

export interface SubgroupGemm {
  /** a and b as expanded to the batch ((batch..., M, K) and (batch..., K, N)): their strides pick the staging. */
  a: Tensor; b: Tensor; out: Tensor; params: Params; M: number; N: number; K: number; batches: number;
  bias?: Tensor; gate?: Tensor; residual?: Tensor; act: Activation;
  /** Per-output-channel scales [N] (f32 or f16) of an int8 b. */
  scales?: Tensor;
}

type Plan = { config: SubgroupMatrixConfig; sg: number } | { reason: string };

/** The f16 x f16 -> f32 config and subgroup size this path would use, or why it cannot run. */
export function subgroupMatrixPlan(e: Engine, opts: { emulate?: boolean } = {}): Plan {
  const d = e.describe();
  const [min, max] = d.subgroupSizes ?? [0, 0];
  const fixed = min && min === max ? null : `subgroup size not fixed (${min}..${max})`;
  if (opts.emulate) {
    if (!e.gpu.hasFeature('subgroups')) return { reason: `adapter ${d.name} lacks subgroups (the emulated kernel uses subgroup_id)` };
    return fixed ? { reason: fixed } : { config: { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 }, sg: min };
  }
  if (!e.gpu.hasFeature(SUBGROUP_MATRIX_FEATURE)) return { reason: `adapter ${d.name} lacks ${SUBGROUP_MATRIX_FEATURE}` };
  const config = d.subgroupMatrixConfigs.find(
    (c) => c.componentType === 'f16' && c.resultComponentType === 'f32' && 32 % c.M === 0 && 32 % c.N === 0 && 32 % c.K === 0,
  );
  if (!config) return { reason: `no f16 x f16 -> f32 subgroup-matrix config with M, N, K dividing 32 in ${JSON.stringify(d.subgroupMatrixConfigs)}` };
  return fixed ? { reason: fixed } : { config, sg: min };
}

export function subgroupMatrixUsable(e: Engine, emulate = false): boolean {
  return 'config' in subgroupMatrixPlan(e, { emulate });
}

/** The tile asked for (a name or a tile: the op's option, else KILN_SUBGROUP_TILE's), else the largest preset that fits `limit`. */
export function subgroupTile(t: SubgroupTile | string | undefined, cfg: { M: number; N: number }, limit: number): SubgroupTile {
  if (typeof t === 'object') return t;
  if (t === undefined) {
    // the file kernel's presets only: a generated variant is taken where a table or the caller names it
    const fits = (Object.values(SUBGROUP_TILES) as SubgroupTile[]).filter((x) => !x.stages && subgroupTileBytes(x, cfg) <= limit);
    return fits.sort((x, y) => subgroupTileBytes(y, cfg) - subgroupTileBytes(x, cfg))[0] ?? SUBGROUP_TILES['128'];
  }
  const tile = (SUBGROUP_TILES as Record<string, SubgroupTile>)[t];
  if (!tile) throw new RangeError(`subgroup-matrix tile '${t}' unknown (KILN_SUBGROUP_TILE?): one of ${Object.keys(SUBGROUP_TILES).join(', ')}`);
  return tile;
}

/** Bytes of workgroup memory the kernel declares for a tile (As, Bs as f16; Cs as f32). */
export function subgroupTileBytes(t: SubgroupTile, cfg: { M: number; N: number }): number {
  if (t.stages) return pipelinedTileBytes(t, cfg);
  const bm = t.sgm * t.fm * cfg.M;
  const bn = t.sgn * t.fn * cfg.N;
  const bs = Math.max((t.bk + t.pad) * bn, (bn + t.pad) * t.bk);   // either staging of B
  return 2 * (bm * (t.bk + t.pad) + bs) + 4 * t.sgm * t.sgn * cfg.M * t.fn * cfg.N;
}

/** Whether the staged inner dim of t can be read `width` elements (one vec4<u32>: 8 halves, 16 int8) at a time:
 * stride 1 there, the extent and every other offset `width`-aligned. */
export function vectorReads(t: Tensor, innerDim: number, extent: number, width = 8): boolean {
  const s = t.strides;
  return s[innerDim] === 1 && extent % width === 0 && t.offset % width === 0 && s.every((v, i) => i === innerDim || v % width === 0);
}

const files = new Map<string, string>();
const variants = new Map<string, { shader: string; source: string }>();

/** shaders/<file>.wgsl with its `// tile` consts set (and the builtins emulated if asked), as a kernel name and text,
 * built once per variant rather than on every dispatch (the kernel cache is keyed by name, not text). */
export function tiledKernel(file: string, consts: Record<string, number | boolean>, emulate = false): { shader: string; source: string } {
  const shader = `${file}${emulate ? '_emulated' : ''}_${Object.entries(consts).map(([k, v]) => `${k}${Number(v)}`).join('_')}`;
  let hit = variants.get(shader);
  if (!hit) {
    let text = files.get(file);
    if (text === undefined) files.set(file, (text = readFileSync(join(projectRoot(), 'shaders', `${file}.wgsl`), 'utf8')));
    let source = withTileConstants(text, consts, `${file}.wgsl`);
    if (emulate) source = emulateSubgroupMatrix(source, `${file}.wgsl`);
    variants.set(shader, (hit = { shader, source }));
  }
  return hit;
}

/** The generated double-buffered kernel (ops/matmul_subgroup_gen.ts) for these consts, built once per variant. */
export function pipelinedKernel(c: Record<string, number | boolean>, tile: SubgroupTile, emulate = false): { shader: string; source: string } {
  const shader = `matmul_subgroup_db${emulate ? '_emulated' : ''}_${Object.entries(c).map(([k, v]) => `${k}${Number(v)}`).join('_')}_ST${tile.stages}`;
  let hit = variants.get(shader);
  if (!hit) {
    let source = pipelinedGemmSource({
      SM_M: Number(c.SM_M), SM_N: Number(c.SM_N), SM_K: Number(c.SM_K), SG: Number(c.SG), tile,
      B_NK: Boolean(c.B_NK), VA: Boolean(c.VA), VB: Boolean(c.VB), BQ: Boolean(c.BQ),
    });
    if (emulate) source = emulateSubgroupMatrix(source, `${shader}.wgsl`);
    variants.set(shader, (hit = { shader, source }));
  }
  return hit;
}

export function gemmSubgroup(e: Engine, op: string, g: SubgroupGemm, opts: SubgroupOptions = {}): void {
  const plan = subgroupMatrixPlan(e, opts);
  if (!('config' in plan)) throw new Error(`${op}: subgroup-matrix GEMM unavailable: ${plan.reason}`);
  if (g.a.dtype !== 'f16' || (g.b.dtype !== 'f16' && g.b.dtype !== 'i8')) {
    throw new TypeError(`${op}: subgroup-matrix GEMM needs f16 a and an f16 or int8 b (got ${g.a}, ${g.b})`);
  }
  const bq = g.b.dtype === 'i8';   // gemm() has checked that scales come with an int8 b, and only with one
  const bWidth = bq ? 16 : 8;       // b's elements in one vec4<u32> read
  const limit = e.describe().limits.maxComputeWorkgroupStorageSize;
  const tile = subgroupTile(opts.tile ?? e.settings.subgroupTile, plan.config, limit);
  const { M: cm, N: cn, K: ck } = plan.config;
  if (tile.bk % ck !== 0 || tile.bk % (tile.stages ? 16 : 8) !== 0) throw new RangeError(`${op}: tile bk ${tile.bk} must be a multiple of 8 and of the config's K ${ck}`);
  const bytes = subgroupTileBytes(tile, plan.config);
  if (bytes > limit) throw new RangeError(`${op}: subgroup-matrix tile ${JSON.stringify(tile)} needs ${bytes} B of workgroup memory, the adapter has ${limit}`);
  const r = g.a.rank;
  const bNK = g.b.strides[r - 2] === 1 && g.b.strides[r - 1] !== 1;   // k contiguous: a linear weight's transpose view
  const consts: Record<string, number | boolean> = {
    SM_M: cm, SM_N: cn, SM_K: ck, SG: plan.sg, SGM: tile.sgm, SGN: tile.sgn, FM: tile.fm, FN: tile.fn, BK: tile.bk, PAD: tile.pad,
    B_NK: bNK,
    VA: vectorReads(g.a, r - 1, g.K),
    VB: bNK ? vectorReads(g.b, r - 2, g.K, bWidth) : vectorReads(g.b, r - 1, g.N, bWidth),
    BQ: bq,
  };
  const { shader, source } = tile.stages ? pipelinedKernel(consts, tile, opts.emulate) : tiledKernel('matmul_subgroup', consts, opts.emulate);
  const kernel = e.kernels.get({
    shader,
    entry: 'matmul',
    dtype: g.out.dtype,
    source,
    constants: { ACT: ACT_CODE[g.act], BIAS: !!g.bias, GATE: !!g.gate, RESID: !!g.residual, SATURATE: g.out.dtype === 'f16', STYPE: g.scales?.dtype === 'f16' ? 1 : 0 },
  });
  e.recorder.dispatch({
    kernel,
    bindings: [g.out, g.a, g.b, g.bias ?? g.a, g.gate ?? g.a, g.residual ?? g.a, g.scales ?? g.a],
    params: g.params,
    workgroups: [Math.ceil(g.N / (tile.sgn * tile.fn * cn)), Math.ceil(g.M / (tile.sgm * tile.fm * cm)), g.batches],
    flops: 2 * g.batches * g.M * g.N * g.K,
    rate: gemmRate(g.M, g.N),
    shape: gemmShape(g.batches, g.M, g.K, g.N),
  });
}

/** Rewrites each `const NAME: type = v; // tile` line of the kernel; every name given must be there. */
export function withTileConstants(src: string, consts: Record<string, number | boolean>, file = 'matmul_subgroup.wgsl'): string {
  let out = src;
  for (const [name, v] of Object.entries(consts)) {
    const re = new RegExp(`^const ${name}: (u32|bool) = [^;]+;(\\s*// tile)$`, 'm');
    const m = re.exec(out);
    if (!m) throw new Error(`matmul_subgroup.wgsl: no \`const ${name}: ...; // tile\` line to set`);
    const value = m[1] === 'bool' ? String(Boolean(v)) : `${Number(v)}u`;
    out = out.replace(re, `const ${name}: ${m[1]} = ${value};$2`);
  }
  return out;
}
