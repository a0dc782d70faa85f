// Token sampling for autoregressive decoding on logits (B, V): repetition penalty (HF semantics), top-k
// (k <= 64, lowest index first on ties), temperature, then one draw per row from a counter-based RNG keyed by
// (seed, step, row). Wrapper: src/engine/ops/sampling.ts; reference: test/engine/reference/sampling.ts.
// Header: `alias T = f32;` or `enable f16; alias T = f16;` (the logits' type).
//
// Three entries, recorded in order (later dispatches see earlier writes):
//   prepare   scratch[b, v] = logits[b, v] (f32), one thread per element
//   penalize  for each previous token id t of row b: x = logits[b, t]; scratch[b, t] = x > 0 ? x / pen : x * pen
//             (duplicate ids write the same value, so a token is penalised once, as HF's gather/scatter does)
//   pick      one workgroup per row: k rounds of argmax over scratch (each winner is then excluded), then
//             p_r = exp((top_r - top_0) / temperature), u = uniform(seed, step, b), token = first r with
//             u * sum(p) < p_0 + .. + p_r. temperature 0 or k = 1 is greedy.
// Bindings: 0 params, 1 tokens (f32 ids, B) / scratch (f32, B*V) per entry, 2 logits, 3 prev (f32 ids).
// Entries penalize_int / pick_int read prev / write tokens as int32 (the layout of uploadIds, which gather
// reads), so a sampled id can feed the next embedding lookup on the GPU with no readback. They are separate
// entries because an entry point may not use two variables of one binding.

override WG: u32 = 64u;          // a power of two
const MAX_K: u32 = 64u;
const EXCLUDED: f32 = -3.4028234e38;

struct Params {
  B: u32, V: u32, P: u32, K: u32,
  l_off: u32, l_row: u32, l_col: u32, seed: u32,
  p_off: u32, p_row: u32, p_col: u32, step: u32,
  temperature: f32, penalty: f32, out_off: u32, _p1: u32,   // out_off: the tokens' element offset
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> tokens: array<f32>;
@group(0) @binding(1) var<storage, read_write> scratch_w: array<f32>;
@group(0) @binding(2) var<storage, read> logits: array<T>;
@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;   // pick: the prepared logits
@group(0) @binding(1) var<storage, read_write> tokens_i: array<i32>;
@group(0) @binding(3) var<storage, read> prev: array<f32>;
@group(0) @binding(3) var<storage, read> prev_i: array<i32>;

var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> top_v: array<f32, MAX_K>;
var<workgroup> top_i: array<u32, MAX_K>;

fn logit(b: u32, v: u32) -> f32 {
  return f32(logits[p.l_off + b * p.l_row + v * p.l_col]);
}

// PCG hash (Jarzynski & Olano 2020, "Hash Functions for GPU Rendering"): a 32-bit counter-based generator.
fn pcg(x: u32) -> u32 {
  let state = x * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

// Uniform in [0, 1) with 24 random bits (exact in f32), keyed by (seed, step, row).
fn rand_uniform(seed: u32, step: u32, row: u32) -> f32 {
  return f32(pcg(pcg(pcg(seed) ^ step) ^ row) >> 8u) / 16777216.0;
}

@compute @workgroup_size(WG)
fn prepare(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.B * p.V) { return; }
  scratch_w[i] = logit(i / p.V, i % p.V);
}

// Penalises logit (b, v) of a previous token id t of row b; ids outside the vocabulary (e.g. -1 padding) are ignored.
fn penalize_id(b: u32, t: i32) {
  if (t < 0 || u32(t) >= p.V) { return; }
  let v = u32(t);
  let x = logit(b, v);
  scratch_w[b * p.V + v] = select(x * p.penalty, x / p.penalty, x > 0.0);
}

@compute @workgroup_size(WG)
fn penalize(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.B * p.P) { return; }
  let b = i / p.P;
  let t = prev[p.p_off + b * p.p_row + (i % p.P) * p.p_col];
  if (!(t >= 0.0 && t < f32(p.V))) { return; }   // also NaN; checked in f32 before the integer conversion
  penalize_id(b, i32(t));
}

@compute @workgroup_size(WG)
fn penalize_int(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.B * p.P) { return; }
  let b = i / p.P;
  penalize_id(b, prev_i[p.p_off + b * p.p_row + (i % p.P) * p.p_col]);
}

// Row b's token (valid in invocation 0 only); every invocation of the workgroup calls it (barriers).
fn choose(lid: vec3<u32>, b: u32) -> u32 {
  let base = b * p.V;
  for (var r = 0u; r < p.K; r++) {
    var best = EXCLUDED;
    var bi = 0xffffffffu;
    for (var v = lid.x; v < p.V; v += WG) {
      let x = scratch[base + v];
      if (x > best) { best = x; bi = v; }   // v rises: the first maximum is kept
    }
    red_v[lid.x] = best;
    red_i[lid.x] = bi;
    for (var s = WG / 2u; s > 0u; s /= 2u) {
      workgroupBarrier();
      if (lid.x < s) {
        let ov = red_v[lid.x + s];
        let oi = red_i[lid.x + s];
        if (oi != 0xffffffffu && (red_i[lid.x] == 0xffffffffu || ov > red_v[lid.x] || (ov == red_v[lid.x] && oi < red_i[lid.x]))) {
          red_v[lid.x] = ov;
          red_i[lid.x] = oi;
        }
      }
    }
    workgroupBarrier();
    if (lid.x == 0u) {
      top_v[r] = red_v[0];
      top_i[r] = red_i[0];
      scratch[base + red_i[0]] = EXCLUDED;   // excluded from the next rounds
    }
    storageBarrier();
    workgroupBarrier();
  }
  var token = top_i[0];
  if (p.K > 1u && p.temperature > 0.0) {
    var total = 0.0;
    for (var r = 0u; r < p.K; r++) { total += exp((top_v[r] - top_v[0]) / p.temperature); }
    let goal = rand_uniform(p.seed, p.step, b) * total;
    var cum = 0.0;
    for (var r = 0u; r < p.K; r++) {
      cum += exp((top_v[r] - top_v[0]) / p.temperature);
      token = top_i[r];
      if (goal < cum) { break; }
    }
  }
  return token;
}

@compute @workgroup_size(WG)
fn pick(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let token = choose(lid, wid.x);
  if (lid.x == 0u) { tokens[p.out_off + wid.x] = f32(token); }
}

@compute @workgroup_size(WG)
fn pick_int(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let token = choose(lid, wid.x);
  if (lid.x == 0u) { tokens_i[p.out_off + wid.x] = i32(token); }
}
