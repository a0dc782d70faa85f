// Tensor-core GEMM through chromium-experimental-subgroup-matrix (f16 x f16 -> f32). Not written yet:
// every call takes the register-tiled path in matmul.ts.
import type { Engine } from '../engine';
import type { Tensor } from '../tensor';
import type { Activation } from './matmul';

export interface SubgroupGemm {
  a: Tensor; b: Tensor; out: Tensor; M: number; N: number; K: number; batch: number[];
  bias?: Tensor; g?: Tensor; r?: Tensor; act: Activation;
}

export function subgroupMatrixUsable(_e: Engine, _M: number, _N: number, _K: number): boolean {
  return false;
}

export function gemmSubgroup(_e: Engine, op: string, _args: SubgroupGemm): Tensor {
  throw new Error(`${op}: the subgroup-matrix GEMM path is not available`);
}
