// The pipelined tensor-core GEMM (issue 43): WGSL generated from TS for one variant (tile, BK, padding, stages),
// beside shaders/matmul_subgroup.wgsl (which stays the default until a GPU sweep picks a winner). Same contract,
// Params, bindings and epilogue (bias, activation, gate, residual, int8 weights staged as f16 with the
// per-output-channel scale, saturate.wgsl), so ops/matmul_subgroup.ts dispatches either with the same bindings.
//
// What differs from the file kernel, and why (the structure of the cooperative-matrix GEMMs that reach ~65 % of the
// tensor peak, e.g. llama.cpp's Vulkan coopmat kernel):
//  - two K slices of workgroup memory (stages = 2): while slice t's MMAs run out of one stage, slice t+1's global
//    loads are already issued into registers; the registers go to the other stage after the MMAs, then ONE barrier
//    per slice (the file kernel: load, store, barrier, MMAs, barrier, with nothing in flight during the math);
//  - each thread's share of a slice is a fixed, generated list of 16-byte units (8 halves, or 16 int8 bytes): one
//    vec4<u32> global read per unit where the operand allows it (VA / VB), kept in a named register, and written
//    as 8 (16) consecutive halves at a 16-byte aligned shared offset. (The shared arrays must be array<f16> for
//    subgroupMatrixLoad, so WGSL has no wider store to them; consecutive aligned stores are what a compiler merges.)
//  - rows padded by PAD halves (default 8 = 16 bytes): a 40-half row stride puts 8 consecutive fragment rows on 8
//    different 4-bank groups, where the unpadded 32/64-half stride puts them all on the same banks;
//  - accumulators, fragment loads and the K steps inside a slice are generated code: named variables
//    (acc_i_j, l_i, r_j), no dynamically indexed fragment arrays for the compiler to spill;
//  - the epilogue goes one fragment at a time through a 1 KiB-per-subgroup Cs (so the two stages fit 48 KiB at
//    128x128): more barriers there, but the epilogue is a small share of a K = 3072..12288 GEMM.
// Emulation (tests on lavapipe): ops/subgroup_matrix_emulation.ts rewrites this text as it does the file kernel;
// the generator keeps to the forms it knows (canonical matrix types, `&ARR` loads and stores, `lane` in scope).
//
// AQ (W8A8, ops/matmul_w8a8.ts): the same kernel with int8 activations too (quantised per token by
// ops/quantize_act.ts): i8 x i8 -> i32 matrices (NVIDIA: 16x16x32, twice the f16 rate), As and Bs array<i32> of 4
// packed int8 each (Dawn's i8 matrices load from i32 arrays; offsets and strides count int8 elements), 16-int8
// units copied word by word (no unpacking), Cs i32, and the epilogue y = f32(acc) * ascales[row] * scale[n] before
// bias, activation, gate and residual. Needs both operands' K contiguous and 16-aligned (VA, VB, B_NK, BQ).
import type { SubgroupTile } from './matmul_subgroup';

/** The generated kernel's parameters: the adapter's matrix config and subgroup size, the tile, the operand
 * layout flags the wrapper derives (B_NK, VA, VB, BQ: as in shaders/matmul_subgroup.wgsl's header). */
export interface PipelinedGemm {
  SM_M: number; SM_N: number; SM_K: number; SG: number;
  tile: SubgroupTile;
  B_NK: boolean; VA: boolean; VB: boolean; BQ: boolean;
  /** W8A8: int8 activations with per-row scales (binding 8), i8 x i8 -> i32 matrices. */
  AQ?: boolean;
}

/** Workgroup bytes of the generated kernel: `stages` copies of As and Bs (f16, or int8 for W8A8: `elemBytes` 1), and
 * one fragment per subgroup of Cs (f32 or i32). */
export function pipelinedTileBytes(t: SubgroupTile, cfg: { M: number; N: number }, elemBytes = 2): number {
  const stages = t.stages ?? 2;
  const bm = t.sgm * t.fm * cfg.M;
  const bn = t.sgn * t.fn * cfg.N;
  const bs = Math.max((t.bk + t.pad) * bn, (bn + t.pad) * t.bk);
  return elemBytes * stages * (bm * (t.bk + t.pad) + bs) + 4 * t.sgm * t.sgn * cfg.M * cfg.N;
}

const u = (n: number) => `${n}u`;

/** The WGSL of one variant (includes still to expand, `T` still to alias: as the shader files). */
export function pipelinedGemmSource(g: PipelinedGemm): string {
  const { SM_M, SM_N, SM_K, SG, tile: t, B_NK, VA, VB, BQ } = g;
  const AQ = g.AQ ?? false;
  if (AQ && !(B_NK && VA && VB && BQ)) throw new RangeError('pipelined GEMM: W8A8 needs int8 a and b, both K-contiguous and 16-aligned (B_NK, VA, VB, BQ)');
  if (AQ && t.pad % 16 !== 0) throw new RangeError(`pipelined GEMM: W8A8 pad ${t.pad} must be a multiple of 16 int8 (16-byte aligned unit stores)`);
  const stages = t.stages ?? 2;
  if (stages !== 2) throw new RangeError(`pipelined GEMM: stages ${stages}: only 2 (double-buffered) is generated`);
  if (t.bk % SM_K !== 0 || t.bk % 16 !== 0) throw new RangeError(`pipelined GEMM: bk ${t.bk} must be a multiple of 16 and of the config's K ${SM_K}`);
  if (t.pad % 8 !== 0) throw new RangeError(`pipelined GEMM: pad ${t.pad} must be a multiple of 8 halves (16-byte aligned unit stores)`);
  const NT = t.sgm * t.sgn * SG;
  const WM = t.fm * SM_M, WN = t.fn * SM_N;
  const BM = t.sgm * WM, BN = t.sgn * WN, BK = t.bk;
  const AS_STR = BK + t.pad;
  const BS_ROWS = B_NK ? BN : BK;
  const BS_IN = B_NK ? BK : BN;
  const BS_STR = BS_IN + t.pad;
  const A_STAGE = BM * AS_STR, B_STAGE = BS_ROWS * BS_STR;
  const FRAG = SM_M * SM_N;
  // units: 8 halves each, or 16 int8 for a vector-read int8 B (and int8 A in W8A8)
  const BW = BQ && VB ? 16 : 8;
  const AW = AQ ? 16 : 8;
  const UA = (BM * BK) / AW, UB = (BS_ROWS * BS_IN) / BW;
  // matrix types and the staging arrays' element type (W8A8: 4 int8 per i32, offsets in int8)
  const [EL, ACC, SH] = AQ ? ['i8', 'i32', 'i32'] : ['f16', 'f32', 'f16'];
  const SHN = AQ ? 4 : 1;   // staged elements per array element
  const nA = Math.ceil(UA / NT), nB = Math.ceil(UB / NT);

  const L: string[] = [];
  const line = (s: string) => L.push(s);
  line(`// Generated by src/engine/ops/matmul_subgroup_gen.ts (issue 43): the double-buffered tensor-core GEMM,`);
  line(`// ${BM}x${BN} tile of ${t.sgm}x${t.sgn} subgroups, BK ${BK}, pad ${t.pad}, stages ${stages}, B_NK ${B_NK}, VA ${VA}, VB ${VB}, BQ ${BQ}${AQ ? ', AQ (W8A8)' : ''}.`);
  line(`diagnostic(off, chromium.subgroup_matrix_uniformity);`);
  line(`enable chromium_experimental_subgroup_matrix;`);
  line(`enable subgroups;`);
  line(``);
  line(`const SM_M: u32 = ${u(SM_M)};`);
  line(`const SM_N: u32 = ${u(SM_N)};`);
  line(`const SM_K: u32 = ${u(SM_K)};`);
  line(`const SG: u32 = ${u(SG)};`);
  line(`override ACT: u32 = 0u;`);
  line(`override BIAS: bool = false;`);
  line(`override GATE: bool = false;`);
  line(`override RESID: bool = false;`);
  line(`//#include "common/saturate.wgsl"`);
  line(`override STYPE: u32 = 0u;`);
  line(``);
  line(`struct Params {
  M: u32, N: u32, K: u32, bias_str: u32,
  bshape: vec4<u32>,
  offs: vec4<u32>,
  offs2: vec4<u32>,
  a_b: vec4<u32>, a_mk: vec4<u32>,
  b_b: vec4<u32>, b_kn: vec4<u32>,
  g_b: vec4<u32>, g_mn: vec4<u32>,
  r_b: vec4<u32>, r_mn: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> bias: array<T>;
@group(0) @binding(5) var<storage, read> gate: array<T>;
@group(0) @binding(6) var<storage, read> resid: array<T>;
@group(0) @binding(7) var<storage, read> scales: array<u32>;
${AQ ? '@group(0) @binding(8) var<storage, read> ascales: array<f32>;   // per row of a (M per batch)\n' : ''}
// two stages of each operand's K slice, rows padded; Cs one fragment per subgroup (the epilogue's staging)
var<workgroup> As: array<${SH}, ${u((2 * A_STAGE) / SHN)}>;
var<workgroup> Bs: array<${SH}, ${u((2 * B_STAGE) / SHN)}>;
var<workgroup> Cs: array<${ACC}, ${u(t.sgm * t.sgn * FRAG)}>;

//#include "common/act.wgsl"
//#include "common/dot3.wgsl"
//#include "common/int8_scale.wgsl"

fn a_half(e: u32) -> f16 { return bitcast<vec2<f16>>(a[e >> 3u][(e >> 1u) & 3u])[e & 1u]; }
fn b_elem(e: u32) -> f16 {
  ${BQ ? 'return f16(extractBits(bitcast<i32>(b[e >> 4u][(e >> 2u) & 3u]), (e & 3u) * 8u, 8u));' : 'return bitcast<vec2<f16>>(b[e >> 3u][(e >> 1u) & 3u])[e & 1u];'}
}
fn pack8(h: array<f16, 8>) -> vec4<u32> {
  return vec4<u32>(bitcast<u32>(vec2<f16>(h[0], h[1])), bitcast<u32>(vec2<f16>(h[2], h[3])),
                   bitcast<u32>(vec2<f16>(h[4], h[5])), bitcast<u32>(vec2<f16>(h[6], h[7])));
}
${AQ ? '' : `// one unit (8 halves) at a 16-byte aligned offset
fn put8_a(o: u32, w: vec4<u32>) {
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y); let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  As[o] = h0.x; As[o + 1u] = h0.y; As[o + 2u] = h1.x; As[o + 3u] = h1.y;
  As[o + 4u] = h2.x; As[o + 5u] = h2.y; As[o + 6u] = h3.x; As[o + 7u] = h3.y;
}
`}fn put_b(o: u32, w: vec4<u32>) {`);
  if (AQ) {
    line(`  Bs[o / 4u] = bitcast<i32>(w.x); Bs[o / 4u + 1u] = bitcast<i32>(w.y); Bs[o / 4u + 2u] = bitcast<i32>(w.z); Bs[o / 4u + 3u] = bitcast<i32>(w.w);`);
  } else if (BW === 16) {
    line(`  for (var q = 0u; q < 4u; q++) {
    let v = unpack4xI8(w[q]);
    Bs[o + 4u * q] = f16(v.x); Bs[o + 4u * q + 1u] = f16(v.y); Bs[o + 4u * q + 2u] = f16(v.z); Bs[o + 4u * q + 3u] = f16(v.w);
  }`);
  } else {
    line(`  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y); let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  Bs[o] = h0.x; Bs[o + 1u] = h0.y; Bs[o + 2u] = h1.x; Bs[o + 3u] = h1.y;
  Bs[o + 4u] = h2.x; Bs[o + 5u] = h2.y; Bs[o + 6u] = h3.x; Bs[o + 7u] = h3.y;`);
  }
  line(`}`);
  if (AQ) {
    line(`// W8A8: one unit (16 int8) at a 16-byte aligned offset (in int8)
fn put16_a(o: u32, w: vec4<u32>) {
  As[o / 4u] = bitcast<i32>(w.x); As[o / 4u + 1u] = bitcast<i32>(w.y); As[o / 4u + 2u] = bitcast<i32>(w.z); As[o / 4u + 3u] = bitcast<i32>(w.w);
}`);
  }
  // global reads of one unit (zero outside the matrix)
  line(`// A's unit u of the slice at k0: (m, k) = (m0 + u / ${BK / AW}, k0 + (u % ${BK / AW}) * ${AW})
fn load_a(u: u32, abase: u32, m0: u32, k0: u32) -> vec4<u32> {
  let m = m0 + u / ${u(BK / AW)};
  let k = k0 + (u % ${u(BK / AW)}) * ${u(AW)};
  if (m >= p.M) { return vec4<u32>(0u); }`);
  if (VA) {
    line(`  if (k >= p.K) { return vec4<u32>(0u); }
  return a[(abase + m * p.a_mk.x + k) >> ${AQ ? '4u' : '3u'}];`);
  } else {
    line(`  var h = array<f16, 8>();
  for (var q = 0u; q < 8u; q++) {
    if (k + q < p.K) { h[q] = a_half(abase + m * p.a_mk.x + (k + q) * p.a_mk.y); }
  }
  return pack8(h);`);
  }
  line(`}`);
  const bIn = BS_IN / BW;
  line(`// B's unit u: staged row r = u / ${bIn} (n if B_NK, else k), inner c = (u % ${bIn}) * ${BW}
fn load_b(u: u32, bbase: u32, n0: u32, k0: u32) -> vec4<u32> {
  let r = ${B_NK ? 'n0' : 'k0'} + u / ${u(bIn)};
  let c = ${B_NK ? 'k0' : 'n0'} + (u % ${u(bIn)}) * ${u(BW)};
  if (r >= ${B_NK ? 'p.N' : 'p.K'}) { return vec4<u32>(0u); }`);
  const rstr = B_NK ? 'p.b_kn.y' : 'p.b_kn.x';
  const istr = B_NK ? 'p.b_kn.x' : 'p.b_kn.y';
  const ilim = B_NK ? 'p.K' : 'p.N';
  if (VB) {
    line(`  if (c >= ${ilim}) { return vec4<u32>(0u); }
  return b[(bbase + r * ${rstr} + c) / ${u(BQ ? 16 : 8)}];`);
  } else {
    line(`  var h = array<f16, 8>();
  for (var q = 0u; q < 8u; q++) {
    if (c + q < ${ilim}) { h[q] = b_elem(bbase + r * ${rstr} + (c + q) * ${istr}); }
  }
  return pack8(h);`);
  }
  line(`}`);
  line(`
fn epilogue(m: u32, n: u32, acc: ${ACC}, obase: u32, gbase: u32, rbase: u32${AQ ? ', row: u32' : ''}) {
  var y = ${AQ ? 'f32(acc) * ascales[row]' : 'acc'};
  if (BQ) { y *= load_scale(n); }
  if (BIAS) { y += f32(bias[p.offs.z + n * p.bias_str]); }
  y = act(y);
  if (GATE) { y *= f32(gate[gbase + m * p.g_mn.x + n * p.g_mn.y]); }
  if (RESID) { y += f32(resid[rbase + m * p.r_mn.x + n * p.r_mn.y]); }
  out[obase + m * p.N + n] = T(finite(y));
}
const BQ: bool = ${BQ};
`);
  // the kernel
  line(`@compute @workgroup_size(${NT})
fn matmul(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.y * ${u(BM)};
  let n0 = wid.x * ${u(BN)};
  let z = wid.z;
  let bc = vec3<u32>(z / (p.bshape.y * p.bshape.z), (z / p.bshape.z) % p.bshape.y, z % p.bshape.z);
  let abase = p.offs.x + dot3(bc, p.a_b);
  let bbase = p.offs.y + dot3(bc, p.b_b);
  let wm = (sg % ${u(t.sgm)}) * ${u(WM)};
  let wn = (sg / ${u(t.sgm)}) * ${u(WN)};
  let nk = (p.K + ${u(BK - 1)}) / ${u(BK)};`);
  for (let i = 0; i < t.fm; i++) for (let j = 0; j < t.fn; j++) line(`  var acc_${i}_${j}: subgroup_matrix_result<${ACC}, SM_N, SM_M>;`);
  // a thread's units: tid + s * NT (guarded where the count does not divide)
  const units = (n: number, total: number, f: (s: number, ux: string) => string, ind: string) => {
    for (let s = 0; s < n; s++) {
      const ux = `tid + ${u(s * NT)}`;
      const body = f(s, ux);
      line((s + 1) * NT > total ? `${ind}if (${ux} < ${u(total)}) { ${body} }` : `${ind}${body}`);
    }
  };
  for (let s = 0; s < nA; s++) line(`  var ra${s} = vec4<u32>(0u);`);
  for (let s = 0; s < nB; s++) line(`  var rb${s} = vec4<u32>(0u);`);
  const loads = (k0: string, ind: string) => {
    units(nA, UA, (s, ux) => `ra${s} = load_a(${ux}, abase, m0, ${k0});`, ind);
    units(nB, UB, (s, ux) => `rb${s} = load_b(${ux}, bbase, n0, ${k0});`, ind);
  };
  const stores = (stage: string, ind: string) => {
    units(nA, UA, (s, ux) => `${AQ ? 'put16_a' : 'put8_a'}(${stage} * ${u(A_STAGE)} + (${ux}) / ${u(BK / AW)} * ${u(AS_STR)} + (${ux}) % ${u(BK / AW)} * ${u(AW)}, ra${s});`, ind);
    units(nB, UB, (s, ux) => `put_b(${stage} * ${u(B_STAGE)} + (${ux}) / ${u(bIn)} * ${u(BS_STR)} + (${ux}) % ${u(bIn)} * ${u(BW)}, rb${s});`, ind);
  };
  line(`  // prologue: slice 0 into stage 0`);
  loads('0u', '  ');
  stores('0u', '  ');
  line(`  workgroupBarrier();
  for (var t = 0u; t < nk; t++) {
    let cur = t & 1u;
    let more = t + 1u < nk;
    // the next slice's global loads, in flight during this slice's MMAs
    if (more) {`);
  loads('(t + 1u) * ' + u(BK), '      ');
  line(`    }
    let sa = cur * ${u(A_STAGE)};
    let sb = cur * ${u(B_STAGE)};`);
  for (let kk = 0; kk < BK; kk += SM_K) {
    line(`    {   // k ${kk}..${kk + SM_K}`);
    for (let i = 0; i < t.fm; i++) {
      line(`      let l${i} = subgroupMatrixLoad<subgroup_matrix_left<${EL}, SM_K, SM_M>>(&As, sa + (wm + ${u(i * SM_M)}) * ${u(AS_STR)} + ${u(kk)}, false, ${u(AS_STR)});`);
    }
    for (let j = 0; j < t.fn; j++) {
      const off = B_NK ? `sb + (wn + ${u(j * SM_N)}) * ${u(BS_STR)} + ${u(kk)}` : `sb + ${u(kk * BS_STR)} + wn + ${u(j * SM_N)}`;
      line(`      let r${j} = subgroupMatrixLoad<subgroup_matrix_right<${EL}, SM_N, SM_K>>(&Bs, ${off}, ${B_NK}, ${u(BS_STR)});`);
      for (let i = 0; i < t.fm; i++) line(`      acc_${i}_${j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, acc_${i}_${j});`);
    }
    line(`    }`);
  }
  line(`    // the registers into the other stage (last read by the previous slice's MMAs, before its barrier)
    if (more) {`);
  stores('(cur ^ 1u)', '      ');
  line(`    }
    workgroupBarrier();
  }

  let obase = p.offs2.w + z * p.M * p.N;
  let gbase = p.offs2.x + dot3(bc, p.g_b);
  let rbase = p.offs2.y + dot3(bc, p.r_b);`);
  for (let i = 0; i < t.fm; i++) {
    for (let j = 0; j < t.fn; j++) {
      line(`  subgroupMatrixStore(&Cs, sg * ${u(FRAG)}, acc_${i}_${j}, false, SM_N);
  workgroupBarrier();
  for (var s = tid; s < ${u(t.sgm * t.sgn * FRAG)}; s += ${u(NT)}) {
    let g = s / ${u(FRAG)};
    let m = m0 + (g % ${u(t.sgm)}) * ${u(WM)} + ${u(i * SM_M)} + (s % ${u(FRAG)}) / SM_N;
    let n = n0 + (g / ${u(t.sgm)}) * ${u(WN)} + ${u(j * SM_N)} + s % SM_N;
    if (m < p.M && n < p.N) { epilogue(m, n, Cs[s], obase, gbase, rbase${AQ ? ', z * p.M + m' : ''}); }
  }
  workgroupBarrier();`);
    }
  }
  line(`}`);
  return L.join('\n') + '\n';
}
