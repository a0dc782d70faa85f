// Layout ops: strided copy (materialise any view, or write into a view: concat), pad, gather rows, cast.
// Wrapper: src/engine/ops/layout.ts; CPU reference: test/engine/reference/layout.ts. Bit-exact except cast.
// One thread per output element (cast f32->f16: per output pair); index = gid.x + gid.y * nwg.x * WG.
//
// Entries (bindings: 0 params, 1 out, 2 src, 3 ids):
//   copy:     dst view (dst_off + coords . dst_str) = src view, over `shape` (rank <= 8)
//   pad:      out (contiguous from dst_off, `shape`) from src (`in_shape`, strided) with `before[d]` leading pad per dim;
//             MODE 0 constant (value), 1 replicate (clamp), 2 reflect (mirror without repeating the edge)
//   gather:   out [N, D] (from element dst_str[0]; dst_off is the ids' offset) = table[ids[n], :] (table [V, D] strided; ids int32; an id outside [0, V) gives NaN)
//   f32_to_f16 / f16_to_f32: casts without the f16 extension (pack2x16float / unpack2x16float on u32 words);
//             f16_to_f32 writes from dst_off, f32_to_f16 from word 0 (whole words)

override MODE: u32 = 0u;
override WG: u32 = 256u;

struct Params {
  n: u32,
  rank: u32,
  src_off: u32,
  dst_off: u32,
  value: f32,   // pad constant
  v: u32,       // gather: table rows
  d: u32,       // gather: row length
  nan_bits: u32, // 0x7fc00000: a NaN the compiler cannot fold (constant NaN is a WGSL error)
  shape: array<vec4<u32>, 2>,    // output (iteration) shape
  src_str: array<vec4<u32>, 2>,  // gather: [V stride, D stride]
  dst_str: array<vec4<u32>, 2>,  // copy: destination strides; pad: input shape
  before: array<vec4<u32>, 2>,   // pad: leading pad per dim
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(1) var<storage, read_write> out_f32: array<f32>;
@group(0) @binding(1) var<storage, read_write> out_words: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<T>;
@group(0) @binding(2) var<storage, read> src_f32: array<f32>;
@group(0) @binding(2) var<storage, read> src_words: array<u32>;
@group(0) @binding(3) var<storage, read> ids: array<i32>;

fn dim8(v: array<vec4<u32>, 2>, d: u32) -> u32 {
  return v[d / 4u][d % 4u];
}

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * WG;
}

// Storage index in src of element i of `shape` (row-major), through src_str.
fn src_index(i: u32) -> u32 {
  var rem = i;
  var idx = p.src_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    idx += (rem % s) * dim8(p.src_str, u32(d));
    rem = rem / s;
  }
  return idx;
}

@compute @workgroup_size(WG)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var si = p.src_off;
  var di = p.dst_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    let c = rem % s;
    rem = rem / s;
    si += c * dim8(p.src_str, u32(d));
    di += c * dim8(p.dst_str, u32(d));
  }
  out[di] = src[si];
}

@compute @workgroup_size(WG)
fn pad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  var rem = i;
  var si = p.src_off;
  var inside = true;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let s = dim8(p.shape, u32(d));
    let n_in = i32(dim8(p.dst_str, u32(d)));
    var c = i32(rem % s) - i32(dim8(p.before, u32(d)));
    rem = rem / s;
    if (c < 0 || c >= n_in) {
      switch MODE {
        case 0u: { inside = false; }
        case 1u: { c = clamp(c, 0, n_in - 1); }
        default: {
          // reflect: -1 -> 1, n_in -> n_in - 2 (the wrapper checks pad < n_in)
          if (c < 0) { c = -c; } else { c = 2 * (n_in - 1) - c; }
        }
      }
    }
    si += u32(max(c, 0)) * dim8(p.src_str, u32(d));
  }
  if (inside) { out[p.dst_off + i] = src[si]; } else { out[p.dst_off + i] = T(p.value); }
}

@compute @workgroup_size(WG)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  let row = ids[p.dst_off + i / p.d]; // dst_off: the ids' element offset
  let col = i % p.d;
  if (row < 0 || u32(row) >= p.v) {
    out[dim8(p.dst_str, 0u) + i] = T(bitcast<f32>(p.nan_bits));
    return;
  }
  out[dim8(p.dst_str, 0u) + i] = src[p.src_off + u32(row) * dim8(p.src_str, 0u) + col * dim8(p.src_str, 1u)];
}

// out (f16 words, 2 elements each) = src (f32, strided). The last word of an odd count writes a zero half
// into the tensor's tail padding (its storage is rounded up to 4 bytes).
@compute @workgroup_size(WG)
fn f32_to_f16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let k = flat(gid, nwg);
  if (2u * k >= p.n) { return; }
  let lo = src_f32[src_index(2u * k)];
  var hi = 0.0;
  if (2u * k + 1u < p.n) { hi = src_f32[src_index(2u * k + 1u)]; }
  out_words[k] = pack2x16float(vec2<f32>(lo, hi));
}

// out (f32) = src (f16 words, strided element indices).
@compute @workgroup_size(WG)
fn f16_to_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  if (i >= p.n) { return; }
  let s = src_index(i);
  out_f32[p.dst_off + i] = unpack2x16float(src_words[s / 2u])[s % 2u];
}
