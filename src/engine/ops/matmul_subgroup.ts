// The tensor-core GEMM path: shaders/matmul_subgroup.wgsl (f16 x f16 -> f32 through
// chromium-experimental-subgroup-matrix). matmul()/linear() use it only when asked (path 'subgroup', or 'auto' with
// KILN_SUBGROUP_MATRIX=1) for f16 weights, and only where the adapter has the feature, an f16/f32 subgroup-matrix
// config whose M and N divide 32 and K divides 32, and one fixed subgroup size; everything else (lavapipe, f32,
// int8, and the default) takes the register-tiled kernel.
// Correct on an H200 (2026-11-28, docs/performance.md), not yet timed there: hence opt-in. Its test
// (test/engine/matmul_subgroup.test.ts) runs it against the CPU reference where the feature exists and skips
// (with the reason) elsewhere.
import type { Engine } from '../engine';
import type { SubgroupMatrixConfig } from '../device';
import type { Params } from '../kernels';
import type { Tensor } from '../tensor';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../paths';
import { ACT_CODE, type Activation } from './matmul';

export const SUBGROUP_MATRIX_FEATURE = 'chromium-experimental-subgroup-matrix';

export interface SubgroupGemm {
  a: Tensor; b: Tensor; out: Tensor; params: Params; M: number; N: number; batches: number;
  bias?: Tensor; gate?: Tensor; residual?: Tensor; act: Activation;
}

/** The f16 x f16 -> f32 config and subgroup size this path would use, or why it cannot run. */
export function subgroupMatrixPlan(e: Engine): { config: SubgroupMatrixConfig; sg: number } | { reason: string } {
  if (!e.gpu.hasFeature(SUBGROUP_MATRIX_FEATURE)) return { reason: `adapter ${e.describe().name} lacks ${SUBGROUP_MATRIX_FEATURE}` };
  const d = e.describe();
  const config = d.subgroupMatrixConfigs.find(
    (c) => c.componentType === 'f16' && c.resultComponentType === 'f32' && 32 % c.M === 0 && 32 % c.N === 0 && 32 % c.K === 0,
  );
  if (!config) return { reason: `no f16 x f16 -> f32 subgroup-matrix config with M, N, K dividing 32 in ${JSON.stringify(d.subgroupMatrixConfigs)}` };
  const [min, max] = d.subgroupSizes ?? [0, 0];
  if (!min || min !== max) return { reason: `subgroup size not fixed (${min}..${max})` };
  return { config, sg: min };
}

export function subgroupMatrixUsable(e: Engine): boolean {
  return 'config' in subgroupMatrixPlan(e);
}

let source: string | null = null;

export function gemmSubgroup(e: Engine, op: string, g: SubgroupGemm): void {
  const plan = subgroupMatrixPlan(e);
  if (!('config' in plan)) throw new Error(`${op}: subgroup-matrix GEMM unavailable: ${plan.reason}`);
  if (g.a.dtype !== 'f16' || g.b.dtype !== 'f16') throw new TypeError(`${op}: subgroup-matrix GEMM needs f16 a and b (got ${g.a}, ${g.b})`);
  const { M: cm, N: cn, K: ck } = plan.config;
  // Matrix types need const sizes: rewrite the file's three `const SM_*` lines for this adapter's config.
  source ??= readFileSync(join(projectRoot(), 'shaders', 'matmul_subgroup.wgsl'), 'utf8');
  const src = source
    .replace(/const SM_M: u32 = \d+u;/, `const SM_M: u32 = ${cm}u;`)
    .replace(/const SM_N: u32 = \d+u;/, `const SM_N: u32 = ${cn}u;`)
    .replace(/const SM_K: u32 = \d+u;/, `const SM_K: u32 = ${ck}u;`);
  const kernel = e.kernels.get({
    shader: `matmul_subgroup_${cm}x${cn}x${ck}`,
    entry: 'matmul',
    dtype: g.out.dtype,
    source: src,
    constants: { SG: plan.sg, ACT: ACT_CODE[g.act], BIAS: !!g.bias, GATE: !!g.gate, RESID: !!g.residual },
  });
  e.recorder.dispatch({
    kernel,
    bindings: [g.out, g.a, g.b, g.bias ?? g.a, g.gate ?? g.a, g.residual ?? g.a],
    params: g.params,
    workgroups: [Math.ceil(g.N / 64), Math.ceil(g.M / 64), g.batches],
  });
}
