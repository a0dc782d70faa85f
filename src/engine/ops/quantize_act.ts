// Per-token activation quantiser for the W8A8 GEMM (issue 43): x (M, K) f16 or f32 -> q (M, K) int8, 4 per u32
// (little-endian: element k in bits 8*(k%4) of word k/4, as the i8 tensors the host uploads), and scale (M) f32.
//   scale[m] = absmax_k |x[m, k]| / 127 (f32 division);  q[m, k] = clamp(rha(x[m, k] / scale[m]), -127, 127)
// with rha = round half away from zero (sign(v) * floor(|v| + 0.5), in f32), symmetric like the weights'
// (src/engine/quantize.ts): -128 is never written. A row of zeros gets scale 0 and q 0. Inputs must be finite.
//   kernel:    generated below (one workgroup of WG threads per row: an absmax reduction in workgroup memory,
//              then each thread packs 4 values at a time with pack4xI8)
//   reference: quantizeActRef (below; the test holds the kernel to it)
//   tests:     test/engine/quantize_act.test.ts
import type { Engine } from '../engine';
import { Params } from '../kernels';
import type { Tensor } from '../tensor';

const WG = 64;

export interface QuantizedAct {
  /** (M, K) i8, contiguous at offset 0. */
  q: Tensor;
  /** (M) f32. */
  scales: Tensor;
}

const SOURCE = `
struct Params { M: u32, K: u32, xoff: u32, xstr: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
@group(0) @binding(2) var<storage, read_write> scales: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<T>;
const WG: u32 = ${WG}u;
var<workgroup> red: array<f32, ${WG}>;

// round half away from zero, clamped to the symmetric int8 range
fn qi(v: f32) -> i32 { return i32(clamp(sign(v) * floor(abs(v) + 0.5), -127.0, 127.0)); }

@compute @workgroup_size(${WG})
fn quantize(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let m = wid.y * 65535u + wid.x;   // uniform across the workgroup, so the early return keeps the barriers uniform
  if (m >= p.M) { return; }
  let base = p.xoff + m * p.xstr;
  var mx = 0.0;
  for (var k = tid; k < p.K; k += WG) { mx = max(mx, abs(f32(x[base + k]))); }
  red[tid] = mx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) { red[tid] = max(red[tid], red[tid + s]); }
    workgroupBarrier();
  }
  let sc = red[0] / 127.0;
  if (tid == 0u) { scales[m] = sc; }
  let words = p.K / 4u;
  for (var w = tid; w < words; w += WG) {
    var v = vec4<i32>(0);
    if (sc > 0.0) {
      let o = base + 4u * w;
      v = vec4<i32>(qi(f32(x[o]) / sc), qi(f32(x[o + 1u]) / sc), qi(f32(x[o + 2u]) / sc), qi(f32(x[o + 3u]) / sc));
    }
    q[m * words + w] = pack4xI8(v);
  }
}
`;

/** x (M, K) with unit inner stride (f16 or f32; K a multiple of 4) -> its per-token int8 quantisation. */
export function quantizeActivations(e: Engine, x: Tensor): QuantizedAct {
  if (x.rank !== 2) throw new RangeError(`quantizeActivations: x ${x} must be (M, K)`);
  if (x.dtype === 'i8') throw new TypeError(`quantizeActivations: x ${x} must be f16 or f32`);
  const [M, K] = x.shape as [number, number];
  if (K % 4 !== 0) throw new RangeError(`quantizeActivations: K ${K} must be a multiple of 4 (4 int8 per word)`);
  if (x.strides[1] !== 1 && K > 1) throw new RangeError(`quantizeActivations: x ${x} must have unit inner stride`);
  const q = e.empty([M, K], 'i8', 'w8a8 activations q');
  const scales = e.empty([M], 'f32', 'w8a8 activations scales');
  if (M === 0 || K === 0) return { q, scales };
  const kernel = e.kernels.get({ shader: 'quantize_act', entry: 'quantize', dtype: x.dtype, source: SOURCE });
  const params = new Params().u32(M).u32(K).u32(x.offset).u32(x.strides[0]!);
  const gx = Math.min(M, 65535);
  e.recorder.dispatch({ kernel, bindings: [q, scales, x], params, workgroups: [gx, Math.ceil(M / gx), 1], flops: 3 * M * K });
  return { q, scales };
}

/** The CPU reference (f32 arithmetic as the kernel's): x row-major (M, K) -> q (M, K), scales (M). */
export function quantizeActRef(x: ArrayLike<number>, M: number, K: number): { q: Int8Array; scales: Float32Array } {
  const f = Math.fround;
  const q = new Int8Array(M * K);
  const scales = new Float32Array(M);
  for (let m = 0; m < M; m++) {
    let mx = 0;
    for (let k = 0; k < K; k++) mx = Math.max(mx, Math.abs(x[m * K + k]!));
    const s = f(f(mx) / 127);
    scales[m] = s;
    if (s === 0) continue;
    for (let k = 0; k < K; k++) {
      const v = f(f(x[m * K + k]!) / s);
      const r = Math.sign(v) * Math.floor(f(Math.abs(v) + 0.5));
      q[m * K + k] = Math.max(-127, Math.min(127, r));
    }
  }
  return { q, scales };
}
