// Plain-WGSL stand-ins for the subgroup-matrix builtins (tests only), so a tensor-core kernel's tiling, staging and
// bookkeeping run, and are checked against the CPU reference, on adapters without the feature (lavapipe in CI).
// Used by the GEMM (shaders/matmul_subgroup.wgsl) and the attention (shaders/attention_subgroup.wgsl).
//
// The swap is textual: `subgroupMatrixLoad<TYPE>(&ARR, ...)` and `subgroupMatrixStore(&ARR, ...)` become calls of
// functions generated here for each workgroup array ARR (a WGSL function cannot take a pointer to any array size),
// and the types and the multiply-accumulate become those of shaders/common/subgroup_matrix_emulated.wgsl. Each
// invocation then holds a whole fragment; a store writes the lane's share, so the kernel must name its
// @builtin(subgroup_invocation_id) `lane` wherever it stores. Only the canonical types below are known.
// W8A8 (ops/matmul_w8a8.ts): i8 x i8 -> i32, the i8 operands loaded from array<i32> of 4 packed int8 with offsets
// and strides in int8 elements (as Dawn's i8 loads), the i32 sums exact. A kernel is all f16 or all i8: the
// multiply-accumulate (smMma or smMmaI8) and the result stores are picked for the whole kernel by its result type.

/** Canonical matrix type -> [the emulation's alias, rows, columns, element type ('i8': packed in i32 words)]. */
const TYPES: Record<string, [string, string, string, string]> = {
  'subgroup_matrix_left<f16, SM_K, SM_M>': ['SmLeft', 'SM_M', 'SM_K', 'f16'],
  'subgroup_matrix_right<f16, SM_N, SM_K>': ['SmRight', 'SM_K', 'SM_N', 'f16'],
  'subgroup_matrix_result<f32, SM_N, SM_M>': ['SmAcc', 'SM_M', 'SM_N', 'f32'],
  'subgroup_matrix_left<i8, SM_K, SM_M>': ['SmLeftI8', 'SM_M', 'SM_K', 'i8'],
  'subgroup_matrix_right<i8, SM_N, SM_K>': ['SmRightI8', 'SM_K', 'SM_N', 'i8'],
  'subgroup_matrix_result<i32, SM_N, SM_M>': ['SmAccI32', 'SM_M', 'SM_N', 'i32'],
};

/** `src` (the kernel `file`) with every subgroup-matrix builtin, type and directive replaced by plain WGSL. */
export function emulateSubgroupMatrix(src: string, file: string): string {
  const fail = (what: string): never => { throw new Error(`${file}: the emulation ${what}`); };
  const fns = new Map<string, string>();
  let out = src;
  const i8 = out.includes('subgroup_matrix_result<i32, SM_N, SM_M>');
  if (i8 && /subgroup_matrix_\w+<f(16|32),/.test(out)) fail('has both f16 and i8 matrices: one kernel is emulated as all one or the other');
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
    fns.set(name, storeFn(name, arr, i8 ? 'SmAccI32' : 'SmAcc'));
    return `${name}(lane, `;
  });
  if (!/subgroupMatrixMultiplyAccumulate\(/.test(out)) fail('expects subgroupMatrixMultiplyAccumulate( in the kernel');
  out = out.replace(/subgroupMatrixMultiplyAccumulate\(/g, i8 ? 'smMmaI8(' : 'smMma(');
  for (const [type, [alias]] of Object.entries(TYPES)) out = out.split(type).join(alias);
  const left = /subgroupMatrix\w*|subgroup_matrix_\w+/.exec(out.replace(/^\s*\/\/.*$/gm, ''));
  if (left) fail(`has no stand-in for ${left[0]}`);
  return `${out}\n${i8 ? I8_STANDINS : ''}// --- emulated subgroup-matrix loads and stores, one per workgroup array ---\n${[...fns.values()].join('\n')}`;
}

// The i8 x i8 -> i32 stand-ins beside common/subgroup_matrix_emulated.wgsl's (added to i8 kernels only, so the f16
// kernels' emulated compiles on lavapipe carry nothing more). int8 values are held one per i32.
const I8_STANDINS = `// --- emulated i8 x i8 -> i32 subgroup matrices ---
alias SmLeftI8 = array<i32, SM_M * SM_K>;    // (m, k)
alias SmRightI8 = array<i32, SM_K * SM_N>;   // (k, n)
alias SmAccI32 = array<i32, SM_M * SM_N>;    // (m, n)
// int8 element i of packed words (the caller reads word i / 4): bits 8 (i % 4), sign-extended
fn sm_i8(w: i32, i: u32) -> i32 { return extractBits(w, (i & 3u) * 8u, 8u); }
// exact integer sums, as the builtin's
fn smMmaI8(l: SmLeftI8, r: SmRightI8, c: SmAccI32) -> SmAccI32 {
  var o = c;
  for (var i = 0u; i < SM_M; i++) {
    for (var j = 0u; j < SM_N; j++) {
      var s = o[i * SM_N + j];
      for (var k = 0u; k < SM_K; k++) { s += l[i * SM_K + k] * r[k * SM_N + j]; }
      o[i * SM_N + j] = s;
    }
  }
  return o;
}
`;

// A fragment (rows x cols, row-major in the alias) read from arr at off; (r, c) at off + r*stride + c, or
// off + c*stride + r when col_major.
function loadFn(name: string, arr: string, [alias, rows, cols, elem]: [string, string, string, string]): string {
  const at = 'sm_at(off, r, c, col_major, stride)';
  // an int8 element i of a packed i32 array: bits 8 (i % 4) of word i / 4, sign-extended
  const read = elem === 'i8' ? `sm_i8(${arr}[${at} >> 2u], ${at})` : `${elem}(${arr}[${at}])`;
  return `fn ${name}(off: u32, col_major: bool, stride: u32) -> ${alias} {
  var f: ${alias};
  for (var r = 0u; r < ${rows}; r++) {
    for (var c = 0u; c < ${cols}; c++) { f[r * ${cols} + c] = ${read}; }
  }
  return f;
}`;
}

// The lane's share of an SM_M x SM_N result (elements lane, lane + SG, ...), so each element is written once.
function storeFn(name: string, arr: string, acc: string): string {
  return `fn ${name}(lane: u32, off: u32, c: ${acc}, col_major: bool, stride: u32) {
  for (var e = lane; e < SM_M * SM_N; e += SG) { ${arr}[sm_at(off, e / SM_N, e % SM_N, col_major, stride)] = c[e]; }
}`;
}
