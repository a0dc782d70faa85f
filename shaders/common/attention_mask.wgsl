// What attention.wgsl and attention_subgroup.wgsl share: the Params layout (built by src/engine/ops/attention.ts)
// and the mask. Expects the includer's `p: Params` uniform, `blk` (f32 block ids) binding and MASK override.
struct Params {
  Lq: u32, Lk: u32, Hq: u32, Hkv: u32,
  q_off: u32, k_off: u32, v_off: u32, kv_len: u32,
  q_offset: u32, blk_off: u32, blk_str: u32, scale: f32,
  window: u32, out_off: u32, _pad1: u32, _pad2: u32,   // window 0 = unlimited; out's element offset
  q_str: vec4<u32>,   // (batch, head, position, dim) strides in elements
  k_str: vec4<u32>,
  v_str: vec4<u32>,
}

// Whether the query at key position qpos sees key `key`: inside Lk and kv_len, inside the window, and the mask
// (1 causal: key <= qpos; 2 block-causal: the key's block id <= the query's).
fn visible(qpos: u32, key: u32) -> bool {
  if (key >= p.Lk || key >= p.kv_len) { return false; }
  if (p.window > 0u && key + p.window <= qpos) { return false; }
  if (MASK == 1u) { return key <= qpos; }
  if (MASK == 2u) { return blk[p.blk_off + key * p.blk_str] <= blk[p.blk_off + qpos * p.blk_str]; }
  return true;
}
