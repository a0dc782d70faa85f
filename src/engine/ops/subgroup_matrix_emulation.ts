// Plain-WGSL stand-ins for the subgroup-matrix builtins (tests only), so a tensor-core kernel's tiling, staging and
// bookkeeping run, and are checked against the CPU reference, on adapters without the feature (lavapipe in CI).
// Used by the GEMM (shaders/matmul_subgroup.wgsl) and the attention (shaders/attention_subgroup.wgsl).
//
// The swap is textual: `subgroupMatrixLoad<TYPE>(&ARR, ...)` and `subgroupMatrixStore(&ARR, ...)` become calls of
// functions generated here for each workgroup array ARR (a WGSL function cannot take a pointer to any array size),
// and the types and the multiply-accumulate become those of shaders/common/subgroup_matrix_emulated.wgsl. Each
// invocation then holds a whole fragment; a store writes the lane's share, so the kernel must name its
// @builtin(subgroup_invocation_id) `lane` wherever it stores. Only the three canonical types below are known.

/** Canonical matrix type -> [the emulation's alias, rows, columns, element type]. */
const TYPES: Record<string, [string, string, string, string]> = {
  'subgroup_matrix_left<f16, SM_K, SM_M>': ['SmLeft', 'SM_M', 'SM_K', 'f16'],
  'subgroup_matrix_right<f16, SM_N, SM_K>': ['SmRight', 'SM_K', 'SM_N', 'f16'],
  'subgroup_matrix_result<f32, SM_N, SM_M>': ['SmAcc', 'SM_M', 'SM_N', 'f32'],
};

/** `src` (the kernel `file`) with every subgroup-matrix builtin, type and directive replaced by plain WGSL. */
export function emulateSubgroupMatrix(src: string, file: string): string {
  const fail = (what: string): never => { throw new Error(`${file}: the emulation ${what}`); };
  const fns = new Map<string, string>();
  let out = src;
  const directive = (re: RegExp, to: string) => {
    if (!re.test(out)) fail(`expects ${re} in the kernel`);
    out = out.replace(re, to);
  };
  directive(/^diagnostic\(off, chromium\.subgroup_matrix_uniformity\);$/m, '// (emulated: no subgroup-matrix uniformity check)');
  directive(/^enable chromium_experimental_subgroup_matrix;$/m, '//#include "common/subgroup_matrix_emulated.wgsl"');
  out = out.replace(/subgroupMatrixLoad<(subgroup_matrix_\w+<[^>]*>)>\(&(\w+), /g, (_m, type: string, arr: string) => {
    const t = TYPES[type] ?? fail(`has no stand-in for a load of ${type}`);
    const name = `sm_load_${arr}_${t[0]}`;
    fns.set(name, loadFn(name, arr, t));
    return `${name}(`;
  });
  out = out.replace(/subgroupMatrixStore\(&(\w+), /g, (_m, arr: string) => {
    const name = `sm_store_${arr}`;
    fns.set(name, storeFn(name, arr));
    return `${name}(lane, `;
  });
  if (!/subgroupMatrixMultiplyAccumulate\(/.test(out)) fail('expects subgroupMatrixMultiplyAccumulate( in the kernel');
  out = out.replace(/subgroupMatrixMultiplyAccumulate\(/g, 'smMma(');
  for (const [type, [alias]] of Object.entries(TYPES)) out = out.split(type).join(alias);
  const left = /subgroupMatrix\w*|subgroup_matrix_\w+/.exec(out.replace(/^\s*\/\/.*$/gm, ''));
  if (left) fail(`has no stand-in for ${left[0]}`);
  return `${out}\n// --- emulated subgroup-matrix loads and stores, one per workgroup array ---\n${[...fns.values()].join('\n')}`;
}

// A fragment (rows x cols, row-major in the alias) read from arr at off; (r, c) at off + r*stride + c, or
// off + c*stride + r when col_major.
function loadFn(name: string, arr: string, [alias, rows, cols, elem]: [string, string, string, string]): string {
  return `fn ${name}(off: u32, col_major: bool, stride: u32) -> ${alias} {
  var f: ${alias};
  for (var r = 0u; r < ${rows}; r++) {
    for (var c = 0u; c < ${cols}; c++) { f[r * ${cols} + c] = ${elem}(${arr}[sm_at(off, r, c, col_major, stride)]); }
  }
  return f;
}`;
}

// The lane's share of an SM_M x SM_N result (elements lane, lane + SG, ...), so each element is written once.
function storeFn(name: string, arr: string): string {
  return `fn ${name}(lane: u32, off: u32, c: SmAcc, col_major: bool, stride: u32) {
  for (var e = lane; e < SM_M * SM_N; e += SG) { ${arr}[sm_at(off, e / SM_N, e % SM_N, col_major, stride)] = c[e]; }
}`;
}
