// Resampling on channels-last activations. Wrappers: src/engine/ops/resample.ts (interp),
// src/engine/ops/resample_alias_free.ts (upfir, downfir); CPU reference: test/engine/reference/resample.ts.
// Header (prepended): `alias T = f32;` or `enable f16; alias T = f16;`. Math in f32, rounded to T once. Inputs
// are strided views; out is contiguous. One thread per output element; index = gid.x + gid.y * num_workgroups.x * WG.
//
// Entries (bindings: 0 params, 1 out, 2 x, 3 filter taps as f32 for upfir/downfir):
//   interp:  x [N, T, H, W, C] -> out [N, To, Ho, Wo, C] (1D and 2D have T = H = 1 / T = 1). Per axis, output
//            index o reads source i0, i1 with weight lambda on i1 (PyTorch's upsample_* formulas):
//              MODE 0 nearest:  i0 = i1 = min(floor(o * in / out), in - 1)
//              MODE 1 linear:   s = o * scale (ALIGN, scale = (in-1)/(out-1)) or max((o + 0.5) * scale - 0.5, 0)
//                               (scale = in/out); i0 = min(floor(s), in-1), i1 = min(i0+1, in-1), lambda = s - floor(s)
//            and out is the (multi)linear blend of the 8 corners (1 - lambda or lambda per axis).
//   upfir:   alias-free UpSample1d on x [N, L, C] -> [N, L*R, C]: the input is replicate-padded by `pad` on both
//            sides, zero-stuffed by R (transposed conv, stride R, filter f[K]), times `gain` (= R), and cropped by
//            pad_left: out[t] = gain * sum_{j = (t+pad_left) mod R, step R} f[j] * x[clamp((t+pad_left-j)/R - pad)].
//   downfir: alias-free LowPassFilter1d with stride R: out[t] = sum_j f[j] * x[clamp(t*R + j - pad_left)].

override MODE: u32 = 0u;      // interp: 0 nearest, 1 linear
override ALIGN: bool = false; // interp: align_corners
override WG: u32 = 256u;

struct Params {
  n: u32,           // output elements
  C: u32,
  x_off: u32,
  x_nstr: u32,      // x stride of n
  in_sp: vec4<u32>,   // interp: T, H, W; fir: L, -, -; both: .w = out's element offset (out may be a view)
  out_sp: vec4<u32>,  // interp: To, Ho, Wo, To*Ho*Wo; fir: Lout
  x_str: vec4<u32>,   // interp: strides of T, H, W, C; fir: strides of L, C
  scale: vec4<f32>,   // interp linear: coordinate scale per axis
  fir: vec4<u32>,     // fir: R, K, pad (upfir: replicate pad; downfir: unused), pad_left
  gain: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> x: array<T>;
@group(0) @binding(3) var<storage, read> taps: array<f32>;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

// (i0, i1, lambda) along one axis, lambda as bits (see the header).
fn source(o: u32, insz: u32, outsz: u32, scale: f32) -> vec3<u32> {
  if (MODE == 0u) {
    let i = min((o * insz) / outsz, insz - 1u);
    return vec3<u32>(i, i, 0u);
  }
  var s: f32;
  if (ALIGN) { s = f32(o) * scale; } else { s = max((f32(o) + 0.5) * scale - 0.5, 0.0); }
  let fl = floor(s);
  let i0 = min(u32(fl), insz - 1u);
  return vec3<u32>(i0, min(i0 + 1u, insz - 1u), bitcast<u32>(s - fl));
}

@compute @workgroup_size(WG)
fn interp(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.C;
  let pix = i / p.C;
  let n = pix / p.out_sp.w;
  let q = pix % p.out_sp.w;
  let ow = q % p.out_sp.z;
  let oh = (q / p.out_sp.z) % p.out_sp.y;
  let ot = q / (p.out_sp.z * p.out_sp.y);
  let st = source(ot, p.in_sp.x, p.out_sp.x, p.scale.x);
  let sh = source(oh, p.in_sp.y, p.out_sp.y, p.scale.y);
  let sw = source(ow, p.in_sp.z, p.out_sp.z, p.scale.z);
  let base = p.x_off + n * p.x_nstr + c * p.x_str.w;
  if (MODE == 0u) {
    out[p.in_sp.w + i] = x[base + st.x * p.x_str.x + sh.x * p.x_str.y + sw.x * p.x_str.z];
    return;
  }
  let lt = bitcast<f32>(st.z);
  let lh = bitcast<f32>(sh.z);
  let lw = bitcast<f32>(sw.z);
  var acc = 0.0;
  for (var a = 0u; a < 2u; a++) {
    let it = select(st.x, st.y, a == 1u);
    let wt = select(1.0 - lt, lt, a == 1u);
    for (var b = 0u; b < 2u; b++) {
      let ih = select(sh.x, sh.y, b == 1u);
      let wh = select(1.0 - lh, lh, b == 1u);
      let row = base + it * p.x_str.x + ih * p.x_str.y;
      let v0 = f32(x[row + sw.x * p.x_str.z]);
      let v1 = f32(x[row + sw.y * p.x_str.z]);
      acc += wt * wh * ((1.0 - lw) * v0 + lw * v1);
    }
  }
  out[p.in_sp.w + i] = T(acc);
}

// x[n, clamp(t), c] for a position t on the unpadded axis (replicate padding).
fn x_at(base: u32, t: i32) -> f32 {
  let tc = u32(clamp(t, 0, i32(p.in_sp.x) - 1));
  return f32(x[base + tc * p.x_str.x]);
}

@compute @workgroup_size(WG)
fn upfir(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.C;
  let t = (i / p.C) % p.out_sp.x;
  let n = i / (p.C * p.out_sp.x);
  let base = p.x_off + n * p.x_nstr + c * p.x_str.y;
  let R = p.fir.x;
  let u = t + p.fir.w;   // position in the uncropped transposed-conv output of the padded input
  var acc = 0.0;
  for (var j = u % R; j < p.fir.y && j <= u; j += R) {
    // padded-input index (u - j) / R, i.e. unpadded (u - j) / R - pad
    acc += taps[j] * x_at(base, i32((u - j) / R) - i32(p.fir.z));
  }
  out[p.in_sp.w + i] = T(p.gain * acc);
}

@compute @workgroup_size(WG)
fn downfir(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  let c = i % p.C;
  let t = (i / p.C) % p.out_sp.x;
  let n = i / (p.C * p.out_sp.x);
  let base = p.x_off + n * p.x_nstr + c * p.x_str.y;
  let start = i32(t * p.fir.x) - i32(p.fir.w);
  var acc = 0.0;
  for (var j = 0u; j < p.fir.y; j++) {
    acc += taps[j] * x_at(base, start + i32(j));
  }
  out[p.in_sp.w + i] = T(acc);
}
