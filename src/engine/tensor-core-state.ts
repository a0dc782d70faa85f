// What an engine's 'auto' ops take: the tensor-core kernels or not (tensor-cores.ts checks and decides; a leaf
// module so engine.ts can hold the state without importing the ops).

export interface TensorCoreState {
  /** 'auto' GEMMs may take the tensor-core kernel (medium and large outputs, or where the tuning table says). */
  gemm: boolean;
  /** 'auto' f16 attention takes the tensor-core kernel. */
  attention: boolean;
  /** Why: what was checked and passed, or what is missing or failed. */
  reason: string;
  /** The variants checked ('gemm default', 'gemm db128', 'attention'), passed or not. */
  checked: string[];
  /** Milliseconds the check took (compiling included). */
  ms: number;
}

/** An engine nobody checked (tests, plans, tools): the tensor-core path only where KILN_SUBGROUP_MATRIX=1 or a
 * tuning table asks for it. */
export const TENSOR_CORES_UNCHECKED: TensorCoreState = { gemm: false, attention: false, reason: 'not checked: opt-in (KILN_SUBGROUP_MATRIX=1) or a tuning table', checked: [], ms: 0 };
