// Convolution (1D/2D/3D, plain and transposed) as an implicit GEMM over channels-last activations.
// Wrapper: src/engine/ops/conv.ts; CPU reference: test/engine/reference/conv.ts.
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;` (x, w, bias and out). Products and sums
// are f32; the result is rounded to T once.
//
// Every conv is run as 3D: x [N, T, H, W, Cin] (any strides; conv1d is T = H = 1, conv2d T = 1), out
// [N, To, Ho, Wo, Cout] contiguous. Per group g (of G), the GEMM is
//   out[m, g*Cout_g + co] = sum_k A[m, k] * B[k, co] (+ bias)
//   m = output pixel (n, ot, oh, ow), M = N*To*Ho*Wo rows
//   k = tap * Cin_g + ci (tap = (kt, kh, kw) flattened; ci innermost so consecutive k read consecutive channels)
//   A[m, k] = x[n, pos(ot, kt), pos(oh, kh), pos(ow, kw), g*Cin_g + ci] (0 where padding)
//   B[k, co] = w[g*w_str.x + co*w_str.y + ci*w_str.z + tap*w_str.w]: the wrapper's strides read either the
//              PyTorch layout ([Cout, Cin_g, k...], or [Cin, Cout_g, k...] transposed) or the prepared one
//              ([G, taps, Cin_g, Cout_g], contiguous along co: coalesced B loads).
// Positions: plain  i = o*stride - pad_front + tap*dil; outside [0, size): 0, or clamped to the edge on axes
//                    whose bit is set in p.repl (replicate padding: the causal first frame of video VAEs).
//            TRANSPOSED  num = o + pad_front - tap*dil; contributes only if num >= 0, num % stride == 0 and
//                    i = num / stride < size (the gather form of a scatter-add transposed conv).
//
// Tiling (as shaders/matmul.wgsl): a workgroup of WGX x WGY threads computes (4*WGY) output pixels x (4*WGX)
// output channels of one group; each thread owns a 4x4 block. The tile's pixel coordinates are decoded once
// into workgroup memory (rows), so the K loop decodes only its k. A and B slices of depth BK are staged as
// f32 vec4s. Workgroups: x = group * col_tiles + column tile, row tile = y + z * num_workgroups.y (folded
// past 65535); tiles past M return at once.
//
// Entry depthwise (groups = Cin = Cout, plain conv): one thread per output element (channel fastest, so reads of
// x are coalesced along C), looping over the taps; same Params (w_str.x steps channels, w_str.w taps).
//
// Bindings: 0 params, 1 out, 2 x, 3 w, 4 bias (bound to x when absent).

override WGX: u32 = 16u;        // threads along Cout_g (tile width 4*WGX)
override WGY: u32 = 16u;        // threads along output pixels (tile height 4*WGY)
override BK: u32 = 16u;         // depth of a staged K slice
override TRANSPOSED: bool = false;
override BIAS: bool = false;
override WG: u32 = 256u;        // depthwise: threads per workgroup

struct Params {
  M: u32,           // output pixels N*To*Ho*Wo
  K: u32,           // Cin_g * taps
  cin_g: u32,
  cout_g: u32,
  cout: u32,        // all output channels: the row length of out
  col_tiles: u32,   // column tiles per group
  x_off: u32,
  w_off: u32,
  bias_off: u32,
  bias_str: u32,
  repl: u32,        // replicate-padding axes: bit 0 T, bit 1 H, bit 2 W
  x_nstr: u32,      // x stride of n
  in_sp: vec4<u32>,   // T, H, W, out's element offset (out may be a view of a bigger tensor)
  out_sp: vec4<u32>,  // To, Ho, Wo, To*Ho*Wo
  ks: vec4<u32>,      // kT, kH, kW, kH*kW
  stride: vec4<u32>,
  dil: vec4<u32>,
  pad: vec4<u32>,     // front padding per axis (T, H, W)
  x_str: vec4<u32>,   // x strides of T, H, W, C
  w_str: vec4<u32>,   // w strides: group, co, ci, tap
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read> w: array<T>;
@group(0) @binding(4) var<storage, read> bias: array<T>;

// rows[r] = (x element offset of sample n, or -1 past M; then per axis T, H, W: o*stride - pad, or o + pad
// when TRANSPOSED) for output pixel m0 + r.
var<workgroup> rows: array<vec4<i32>, 4u * WGY>;
// As[k * WGY + i] = A[m0 + 4i .. 4i+3, k0 + k]; Bs[k * WGX + j] = B[k0 + k, n0 + 4j .. 4j+3]
var<workgroup> As: array<vec4<f32>, BK * WGY>;
var<workgroup> Bs: array<vec4<f32>, BK * WGX>;

// Input index along one axis for a plain conv, or -1 for a zero-padded position.
fn axis_plain(pos: i32, size: u32, repl: bool) -> i32 {
  if (pos >= 0 && pos < i32(size)) { return pos; }
  if (repl) { return clamp(pos, 0, i32(size) - 1); }
  return -1;
}

// Input index along one axis for a transposed conv (num = o + pad - tap*dil), or -1 if no input lands here.
fn axis_transposed(num: i32, size: u32, stride: u32) -> i32 {
  if (num < 0 || u32(num) % stride != 0u) { return -1; }
  let i = u32(num) / stride;
  if (i >= size) { return -1; }
  return i32(i);
}

// Element offset of x for a row and a tap offset (tap * dil per axis), or -1 where A is 0.
fn x_index(row: vec4<i32>, off: vec3<i32>) -> i32 {
  var i: vec3<i32>;
  if (TRANSPOSED) {
    let num = row.yzw - off;
    i = vec3<i32>(axis_transposed(num.x, p.in_sp.x, p.stride.x), axis_transposed(num.y, p.in_sp.y, p.stride.y),
                  axis_transposed(num.z, p.in_sp.z, p.stride.z));
  } else {
    let pos = row.yzw + off;
    i = vec3<i32>(axis_plain(pos.x, p.in_sp.x, (p.repl & 1u) != 0u), axis_plain(pos.y, p.in_sp.y, (p.repl & 2u) != 0u),
                  axis_plain(pos.z, p.in_sp.z, (p.repl & 4u) != 0u));
  }
  if (any(i < vec3<i32>(0))) { return -1; }
  return row.x + i.x * i32(p.x_str.x) + i.y * i32(p.x_str.y) + i.z * i32(p.x_str.z);
}

@compute @workgroup_size(WGX, WGY)
fn conv(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
  let tid = lid.y * WGX + lid.x;
  let nthreads = WGX * WGY;
  let g = wid.x / p.col_tiles;
  let n0 = (wid.x % p.col_tiles) * 4u * WGX;
  let m0 = (wid.y + wid.z * nwg.y) * 4u * WGY;
  if (m0 >= p.M) { return; }   // workgroup-uniform: the folded grid's overshoot

  for (var r = tid; r < 4u * WGY; r += nthreads) {
    let m = m0 + r;
    var info = vec4<i32>(-1, 0, 0, 0);
    if (m < p.M) {
      let n = m / p.out_sp.w;
      let q = m % p.out_sp.w;
      let o = vec3<i32>(vec3<u32>(q / (p.out_sp.y * p.out_sp.z), (q / p.out_sp.z) % p.out_sp.y, q % p.out_sp.z));
      let pad = vec3<i32>(p.pad.xyz);
      var pos = vec3<i32>();
      if (TRANSPOSED) { pos = o + pad; } else { pos = o * vec3<i32>(p.stride.xyz) - pad; }
      info = vec4<i32>(i32(p.x_off + n * p.x_nstr), pos);
    }
    rows[r] = info;
  }
  workgroupBarrier();

  let cbase = g * p.cin_g;
  let wbase = p.w_off + g * p.w_str.x;
  var acc: array<vec4<f32>, 4>;   // acc[r] = out[m0 + 4*lid.y + r, n0 + 4*lid.x .. +3]
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    // A slice: consecutive threads walk k, i.e. consecutive input channels of one tap.
    for (var s = tid; s < BK * WGY; s += nthreads) {
      let k = s % BK;
      let i = s / BK;
      let kk = k0 + k;
      var v = vec4<f32>(0.0);
      if (kk < p.K) {
        let ci = kk % p.cin_g;
        let tap = kk / p.cin_g;
        let kt = vec3<u32>(tap / p.ks.w, (tap / p.ks.z) % p.ks.y, tap % p.ks.z);
        let off = vec3<i32>(kt * p.dil.xyz);
        let coff = i32((cbase + ci) * p.x_str.w);
        for (var c = 0u; c < 4u; c++) {
          let row = rows[4u * i + c];
          if (row.x < 0) { continue; }
          let xi = x_index(row, off);
          if (xi >= 0) { v[c] = f32(x[u32(xi + coff)]); }
        }
      }
      As[k * WGY + i] = v;
    }
    // B slice: consecutive threads walk co (contiguous in the prepared layout).
    for (var s = tid; s < BK * WGX; s += nthreads) {
      let j = s % WGX;
      let k = s / WGX;
      let kk = k0 + k;
      var v = vec4<f32>(0.0);
      if (kk < p.K) {
        let kb = wbase + (kk % p.cin_g) * p.w_str.z + (kk / p.cin_g) * p.w_str.w;
        for (var c = 0u; c < 4u; c++) {
          let co = n0 + 4u * j + c;
          if (co < p.cout_g) { v[c] = f32(w[kb + co * p.w_str.y]); }
        }
      }
      Bs[k * WGX + j] = v;
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      let av = As[k * WGY + lid.y];
      let bv = Bs[k * WGX + lid.x];
      acc[0] += av.x * bv;
      acc[1] += av.y * bv;
      acc[2] += av.z * bv;
      acc[3] += av.w * bv;
    }
    workgroupBarrier();
  }

  for (var c = 0u; c < 4u; c++) {
    let co = n0 + 4u * lid.x + c;
    if (co >= p.cout_g) { break; }
    let oc = g * p.cout_g + co;
    var b = 0.0;
    if (BIAS) { b = f32(bias[p.bias_off + oc * p.bias_str]); }
    for (var r = 0u; r < 4u; r++) {
      let m = m0 + 4u * lid.y + r;
      if (m >= p.M) { break; }
      out[p.in_sp.w + m * p.cout + oc] = T(acc[r][c] + b);
    }
  }
}

@compute @workgroup_size(WG)
fn depthwise(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.M * p.cout) { return; }
  let c = i % p.cout;
  let m = i / p.cout;
  let n = m / p.out_sp.w;
  let q = m % p.out_sp.w;
  let o = vec3<i32>(vec3<u32>(q / (p.out_sp.y * p.out_sp.z), (q / p.out_sp.z) % p.out_sp.y, q % p.out_sp.z));
  let row = vec4<i32>(i32(p.x_off + n * p.x_nstr + c * p.x_str.w), o * vec3<i32>(p.stride.xyz) - vec3<i32>(p.pad.xyz));
  let wb = p.w_off + c * p.w_str.x;
  var acc = 0.0;
  var tap = 0u;
  for (var kt = 0u; kt < p.ks.x; kt++) {
    for (var kh = 0u; kh < p.ks.y; kh++) {
      for (var kw = 0u; kw < p.ks.z; kw++) {
        let xi = x_index(row, vec3<i32>(vec3<u32>(kt, kh, kw) * p.dil.xyz));
        if (xi >= 0) { acc += f32(x[u32(xi)]) * f32(w[wb + tap * p.w_str.w]); }
        tap++;
      }
    }
  }
  if (BIAS) { acc += f32(bias[p.bias_off + c * p.bias_str]); }
  out[p.in_sp.w + i] = T(acc);
}
