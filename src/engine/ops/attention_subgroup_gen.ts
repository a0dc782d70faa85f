// The generated tensor-core flash attention (issue 43): WGSL written from TS for one variant (rows per subgroup,
// subgroups, keys per tile), beside shaders/attention_subgroup.wgsl (which stays the default until a GPU sweep picks).
// Same contract, Params and bindings (every mask, GQA, query offset, kv_len, window, views), so
// ops/attention_subgroup.ts dispatches either with the same bindings.
//
// FlashAttention-2's structure, as far as WGSL's subgroup matrices allow. Per (batch, head) a workgroup owns
// R = NSG * FM * SM_M query rows; subgroup g owns FM row blocks of SM_M (RS = FM * SM_M rows), and keeps
//  - its Q fragments (FM x D / SM_K left matrices) in registers, read once at the start;
//  - its output O (FM x D / SM_N result matrices, f32) in registers across ALL key tiles: P V accumulates straight
//    into them (the file kernel stores each tile's P V to workgroup memory and adds it on the lanes);
//  - the row statistics (max m, sum l) on the lanes that own each row, as the file kernel.
// The K and V tiles (BKV x D, f16, rows padded by PAD halves against bank conflicts) are double-buffered through
// registers: tile t+1's K and tile t's V are written to workgroup memory right after tile t's first barrier and
// the next global loads (K of t+2, V of t+1) are issued then, so they are in flight during the softmax, P V and the
// next Q K^T; each of K and V needs one shared copy, not two (NVIDIA's Vulkan gives 48 KiB, which two copies of
// 64-key tiles at D 128 would fill alone). Every shared array is written and read between the same two barriers:
//   t: S = Q K^T (Ks) -> Ss | B1 | Ks <- K(t+1), Vs <- V(t), loads K(t+2), V(t+1); softmax Ss -> Ps, flags |
//      B2 (workgroupUniformLoad of the flags) | rare rescale | O += Ps x Vs
//
// What WGSL forces through workgroup memory, and what it costs: a subgroup matrix's elements are opaque (no element
// access, no row reductions, no per-row scaling; only load, store, multiply-accumulate). So
//  - S goes to Ss (f32) for the lanes to mask, scale, take the row max and sum, and P comes back from Ps (f16) as
//    a left operand: per subgroup and tile RS x BKV x (4 + 4 + 2 + 2) bytes, against the K and V fragment reads
//    (2 x BKV x D x 2 bytes), about 17 FLOP per byte of shared traffic at RS 32, BKV 32, D 128 (the file kernel,
//    which also moves P V through Ss: about 6);
//  - rescaling O by exp(m_old - m_new) per row is not possible in registers, so it is lazy (FlashAttention-4's
//    trick): a row keeps its reference max m until a tile's max exceeds it by more than TH (log2 units), P = 2^(s -
//    m) then lies in [0, 2^TH] (exact in f16 up to TH 15; f16's relative precision does not depend on magnitude)
//    and O and l simply accumulate against the old m. A row whose max does grow by more than TH flags its subgroup
//    (subgroupAny); WGSL has no subgroup barrier, so the rescale itself (O stored to Ss, rows scaled on the lanes,
//    loaded back, D / BKV rounds of three workgroup barriers) runs in workgroup-uniform control flow, entered when
//    any subgroup's flag is set; the flags reach every invocation uniformly through workgroupUniformLoad in place
//    of a plain B2 (one extra barrier per tile). With real data the first visible tile sets m and later growth past
//    2^8 is rare; a row with nothing accumulated yet (l = 0: O's row is zero) just takes the new max.
//  - the epilogue (O / l to out) goes through Ss in the same rounds, once per workgroup.
// The lanes walk their rows of Ss and Ps rotated by the row (key j = (x + r) mod BKV at step x): row r's stride of
// BKV + 4 floats puts lanes r and r + 8 on the same bank when all start at column 0 (4-way conflicts at 32 lanes);
// rotated, lane r is on bank 5r + x (one lane a row) or 6r + 2x + part (two), all distinct.
// Emulation (tests on lavapipe): ops/subgroup_matrix_emulation.ts rewrites this text as it does the file kernels;
// the generator keeps to the forms it knows (canonical matrix types, `&ARR` loads and stores, `lane` in scope).

/** The generated kernel's tile: nsg subgroups of fm row blocks each, bkv keys per tile, rows padded by pad halves,
 * rescale threshold th (log2 units, default 8: P <= 256). */
export interface AttentionGenTile { nsg: number; fm: number; bkv: number; pad: number; th?: number }

export interface GeneratedAttention {
  SM_M: number; SM_N: number; SM_K: number; SG: number; D: number;
  tile: AttentionGenTile;
  /** That operand's head dim is contiguous and 8-aligned: 8 halves per vec4<u32> read (as the file kernel's VQ, VK, VV). */
  VQ: boolean; VK: boolean; VV: boolean;
}

/** Workgroup bytes: Ks and Vs (BKV x (D + PAD) f16 each), Ss (R x (BKV + PAD / 2) f32), Ps (R x (BKV + PAD) f16), flags. */
export function generatedAttentionBytes(t: AttentionGenTile, cfg: { M: number }, D: number): number {
  const R = t.nsg * t.fm * cfg.M;
  return 2 * 2 * t.bkv * (D + t.pad) + 4 * R * (t.bkv + t.pad / 2) + 2 * R * (t.bkv + t.pad) + 4 * t.nsg;
}

/** Why this tile cannot be generated for the config, subgroup size and head dim, or null. */
export function generatedAttentionProblem(t: AttentionGenTile, cfg: { M: number; N: number; K: number }, sg: number, D: number): string | null {
  const rs = t.fm * cfg.M;
  const lpr = Math.max(1, sg / rs);
  if (sg % rs !== 0 && rs % sg !== 0) return `rows per subgroup ${rs} and subgroup size ${sg}: one must divide the other`;
  if (D % cfg.K !== 0 || D % cfg.N !== 0 || D % 8 !== 0) return `head dim ${D} is not a multiple of the matrix config's K ${cfg.K}, N ${cfg.N} and 8`;
  if (t.bkv % cfg.N !== 0 || t.bkv % cfg.K !== 0 || t.bkv % lpr !== 0 || cfg.N % lpr !== 0) return `bkv ${t.bkv} must be a multiple of N ${cfg.N}, K ${cfg.K} and ${lpr} lanes per row`;
  if (t.pad % 8 !== 0) return `pad ${t.pad} must be a multiple of 8 halves`;
  const th = t.th ?? 8;
  if (!(th >= 0 && th <= 15)) return `rescale threshold ${th} outside 0..15 (P <= 2^th in f16)`;
  return null;
}

const u = (n: number) => `${n}u`;
const LEFT = 'subgroup_matrix_left<f16, SM_K, SM_M>';
const RIGHT = 'subgroup_matrix_right<f16, SM_N, SM_K>';
const RESULT = 'subgroup_matrix_result<f32, SM_N, SM_M>';

/** The WGSL of one variant (includes still to expand, `T` still to alias: as the shader files). */
export function generatedAttentionSource(g: GeneratedAttention): string {
  const { SM_M, SM_N, SM_K, SG, D, tile: t, VQ, VK, VV } = g;
  const bad = generatedAttentionProblem(t, { M: SM_M, N: SM_N, K: SM_K }, SG, D);
  if (bad) throw new RangeError(`generated attention: ${bad}`);
  const { nsg: NSG, fm: FM, bkv: BKV, pad: PAD } = t;
  const TH = t.th ?? 8;
  const NT = NSG * SG, RS = FM * SM_M, R = NSG * RS;
  const DS = D + PAD, SS = BKV + PAD / 2, PS = BKV + PAD;
  const LPR = Math.max(1, SG / RS), RPL = Math.max(1, RS / SG), KPL = BKV / LPR;
  const DN = D / SM_N, DK = D / SM_K, KN = BKV / SM_N, KK = BKV / SM_K;
  const CB = KN;                                  // O's column blocks per round through Ss (a row of Ss holds BKV floats)
  const ROUNDS = Math.ceil(DN / CB);
  const U = (BKV * D) / 8;                        // 8-half units of one K or V tile
  const nU = Math.ceil(U / NT);
  const QCH = Math.ceil(R / BKV);                 // Q is staged through Ks, BKV rows at a time

  const L: string[] = [];
  const line = (s: string) => L.push(s);
  line(`// Generated by src/engine/ops/attention_subgroup_gen.ts (issue 43): the register-accumulating tensor-core attention,`);
  line(`// ${R} query rows of ${NSG} subgroups x ${FM} row blocks, ${BKV} keys per tile, D ${D}, pad ${PAD}, rescale threshold 2^${TH}, VQ ${VQ}, VK ${VK}, VV ${VV}.`);
  line(`diagnostic(off, chromium.subgroup_matrix_uniformity);
enable chromium_experimental_subgroup_matrix;
enable subgroups;

const SM_M: u32 = ${u(SM_M)};
const SM_N: u32 = ${u(SM_N)};
const SM_K: u32 = ${u(SM_K)};
const SG: u32 = ${u(SG)};
override MASK: u32 = 0u;   // 0 none, 1 causal, 2 block-causal

//#include "common/attention_mask.wgsl"

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<T>;
@group(0) @binding(2) var<storage, read> q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> blk: array<f32>;

var<workgroup> Ks: array<f16, ${u(BKV * DS)}>;   // Q's rows (a chunk at a time) at the start, then each K tile: (key, d)
var<workgroup> Vs: array<f16, ${u(BKV * DS)}>;   // (key, d)
var<workgroup> Ss: array<f32, ${u(R * SS)}>;    // per subgroup (row, key) scores; O's columns in the rescale and epilogue
var<workgroup> Ps: array<f16, ${u(R * PS)}>;    // per subgroup (row, key) probabilities
var<workgroup> rflag: array<u32, ${u(NSG)}>;    // per subgroup: some row of it needs O rescaled this tile

fn half_of(which: u32, e: u32) -> f16 {
  var w = vec4<u32>(0u);
  if (which == 0u) { w = q[e >> 3u]; } else if (which == 1u) { w = k[e >> 3u]; } else { w = v[e >> 3u]; }
  return bitcast<vec2<f16>>(w[(e >> 1u) & 3u])[e & 1u];
}
// Unit u (8 halves) of rows row0.. of operand which (0 q, 1 k, 2 v): row u / ${D / 8}, dims (u % ${D / 8}) * 8..; zero
// at rows >= lim. vec: 8-aligned contiguous dims, one vec4<u32> read.
fn load_unit(which: u32, u: u32, base: u32, row0: u32, lim: u32, rstr: u32, dstr: u32, vec: bool) -> vec4<u32> {
  let r = row0 + u / ${u(D / 8)};
  let c = (u % ${u(D / 8)}) * 8u;
  if (r >= lim) { return vec4<u32>(0u); }
  let e = base + r * rstr;
  if (vec) {
    let i = (e + c) >> 3u;
    if (which == 0u) { return q[i]; }
    if (which == 1u) { return k[i]; }
    return v[i];
  }
  var h = array<f16, 8>();
  for (var x = 0u; x < 8u; x++) { h[x] = half_of(which, e + (c + x) * dstr); }
  return vec4<u32>(bitcast<u32>(vec2<f16>(h[0], h[1])), bitcast<u32>(vec2<f16>(h[2], h[3])),
                   bitcast<u32>(vec2<f16>(h[4], h[5])), bitcast<u32>(vec2<f16>(h[6], h[7])));
}
// unit u's 8 halves at its 16-byte aligned place in Ks / Vs
fn put_k(u: u32, w: vec4<u32>) {
  let o = u / ${u(D / 8)} * ${u(DS)} + (u % ${u(D / 8)}) * 8u;
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y); let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  Ks[o] = h0.x; Ks[o + 1u] = h0.y; Ks[o + 2u] = h1.x; Ks[o + 3u] = h1.y;
  Ks[o + 4u] = h2.x; Ks[o + 5u] = h2.y; Ks[o + 6u] = h3.x; Ks[o + 7u] = h3.y;
}
fn put_v(u: u32, w: vec4<u32>) {
  let o = u / ${u(D / 8)} * ${u(DS)} + (u % ${u(D / 8)}) * 8u;
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y); let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  Vs[o] = h0.x; Vs[o + 1u] = h0.y; Vs[o + 2u] = h1.x; Vs[o + 3u] = h1.y;
  Vs[o + 4u] = h2.x; Vs[o + 5u] = h2.y; Vs[o + 6u] = h3.x; Vs[o + 7u] = h3.y;
}

// The maximum / sum over the ${LPR} lane(s) owning a row (lanes lane % ${RS} + i * ${RS}).
fn row_max(x: f32) -> f32 {
  var y = x;
  for (var o = ${u(RS)}; o < SG; o <<= 1u) { y = max(y, subgroupShuffleXor(y, o)); }
  return y;
}
fn row_sum(x: f32) -> f32 {
  var y = x;
  for (var o = ${u(RS)}; o < SG; o <<= 1u) { y += subgroupShuffleXor(y, o); }
  return y;
}

@compute @workgroup_size(${NT})
fn attention(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let h = wid.y;
  let bz = wid.z;
  let hk = h / (p.Hq / p.Hkv);
  let q0 = wid.x * ${u(R)};                // the workgroup's first query row
  let sb = sg * ${u(RS * SS)};             // this subgroup's rows of Ss
  let pb = sg * ${u(RS * PS)};             // and of Ps
  let part = lane / ${u(RS)};              // which of its row's lanes this one is (0 with one lane per row)
  let qb = p.q_off + bz * p.q_str.x + h * p.q_str.y;
  let kb = p.k_off + bz * p.k_str.x + hk * p.k_str.y;
  let vb = p.v_off + bz * p.v_str.x + hk * p.v_str.y;
  let scale2 = p.scale * 1.4426950408889634;   // scores in log2 units: P = exp2(s * scale2 - m)

  // Q: ${QCH} chunk(s) of ${BKV} rows through Ks; each subgroup keeps the fragments of its row blocks.`);
  for (let i = 0; i < FM; i++) for (let d = 0; d < DK; d++) line(`  var qf_${i}_${d} = ${LEFT}();`);
  for (let c = 0; c < QCH; c++) {
    const rows = Math.min(BKV, R - c * BKV);
    const units = (rows * D) / 8;
    line(`  for (var s = tid; s < ${u(units)}; s += ${u(NT)}) { put_k(s, load_unit(0u, s, qb, q0 + ${u(c * BKV)}, p.Lq, p.q_str.z, p.q_str.w, ${VQ})); }
  workgroupBarrier();`);
    for (let i = 0; i < FM; i++) {
      line(`  if ((sg * ${u(FM)} + ${u(i)}) * SM_M / ${u(BKV)} == ${u(c)}) {
    let o = ((sg * ${u(FM)} + ${u(i)}) * SM_M - ${u(c * BKV)}) * ${u(DS)};`);
      for (let d = 0; d < DK; d++) line(`    qf_${i}_${d} = subgroupMatrixLoad<${LEFT}>(&Ks, o + ${u(d * SM_K)}, false, ${u(DS)});`);
      line(`  }`);
    }
    line(`  workgroupBarrier();`);
  }
  line(`
  var m = array<f32, ${RPL}>();    // per owned row: reference max of s * scale2 (finite: m - m_new never sees inf - inf)
  var l = array<f32, ${RPL}>();    // sum of 2^(s * scale2 - m)
  var al = array<f32, ${RPL}>();   // this tile's rescale factor 2^(m_old - m_new), 1 when m stays
  for (var i = 0u; i < ${u(RPL)}; i++) { m[i] = -3.0e38; }`);
  for (let i = 0; i < FM; i++) for (let d = 0; d < DN; d++) line(`  var o_${i}_${d} = ${RESULT}();`);
  line(`
  // Keys outside [kstart, kend) are hidden from every row of the workgroup (uniform: wid and params only).
  var kend = min(p.Lk, p.kv_len);
  if (MASK == 1u) { kend = min(kend, min(q0 + ${u(R)}, p.Lq) + p.q_offset); }
  var kstart = 0u;
  if (p.window > 0u && q0 + p.q_offset + 1u > p.window) { kstart = q0 + p.q_offset + 1u - p.window; }
  let nkt = select(0u, (kend - kstart + ${u(BKV - 1)}) / ${u(BKV)}, kend > kstart);

  // prologue: K(0) into Ks; V(0) and K(1) into registers (this thread's units: tid + i * ${NT})`);
  for (let s = 0; s < nU; s++) line(`  var rk${s} = vec4<u32>(0u);\n  var rv${s} = vec4<u32>(0u);`);
  const units = (ind: string, f: (s: number, ux: string) => string) => {
    for (let s = 0; s < nU; s++) {
      const ux = `tid + ${u(s * NT)}`;
      line((s + 1) * NT > U ? `${ind}if (${ux} < ${u(U)}) { ${f(s, ux)} }` : `${ind}${f(s, ux)}`);
    }
  };
  const loadK = (key0: string) => (s: number, ux: string) => `rk${s} = load_unit(1u, ${ux}, kb, ${key0}, p.Lk, p.k_str.z, p.k_str.w, ${VK});`;
  const loadV = (key0: string) => (s: number, ux: string) => `rv${s} = load_unit(2u, ${ux}, vb, ${key0}, p.Lk, p.v_str.z, p.v_str.w, ${VV});`;
  line(`  if (nkt > 0u) {`);
  units('    ', loadK('kstart'));
  units('    ', (s, ux) => `put_k(${ux}, rk${s});`);
  units('    ', loadV('kstart'));
  line(`  }
  if (nkt > 1u) {`);
  units('    ', loadK(`kstart + ${u(BKV)}`));
  line(`  }
  workgroupBarrier();

  for (var t = 0u; t < nkt; t++) {
    let key0 = kstart + t * ${u(BKV)};
    // S = Q K^T (RS x BKV): K's (key, d) rows read column-major as the right operand, each reused by ${FM} row block(s)`);
  for (let j = 0; j < KN; j++) {
    line(`    {`);
    for (let i = 0; i < FM; i++) line(`      var s_${i} = ${RESULT}();`);
    for (let d = 0; d < DK; d++) {
      line(`      let kt${d} = subgroupMatrixLoad<${RIGHT}>(&Ks, ${u(j * SM_N * DS + d * SM_K)}, true, ${u(DS)});`);
      for (let i = 0; i < FM; i++) line(`      s_${i} = subgroupMatrixMultiplyAccumulate(qf_${i}_${d}, kt${d}, s_${i});`);
    }
    for (let i = 0; i < FM; i++) line(`      subgroupMatrixStore(&Ss, sb + ${u(i * SM_M * SS + j * SM_N)}, s_${i}, false, ${u(SS)});`);
    line(`    }`);
  }
  line(`    workgroupBarrier();   // B1: S visible to the lanes; Ks and Vs free (this tile's Q K^T and the last P V are done)
    if (t + 1u < nkt) {`);
  units('      ', (s, ux) => `put_k(${ux}, rk${s});`);
  line(`    }`);
  units('    ', (s, ux) => `put_v(${ux}, rv${s});`);
  line(`    if (t + 2u < nkt) {`);
  units('      ', loadK(`key0 + ${u(2 * BKV)}`));
  line(`    }
    if (t + 1u < nkt) {`);
  units('      ', loadV(`key0 + ${u(BKV)}`));
  line(`    }

    // online softmax on the lanes' rows: mask, scale, max, the lazy rescale decision, P
    var need = false;
    for (var i = 0u; i < ${u(RPL)}; i++) {
      let r = lane % ${u(RS)} + i * SG;
      let qi = q0 + sg * ${u(RS)} + r;
      let qpos = qi + p.q_offset;
      let live = qi < p.Lq;
      var tmax = -3.0e38;
      for (var x = 0u; x < ${u(KPL)}; x++) {
        let j = part + ((x + r) % ${u(KPL)}) * ${u(LPR)};   // rotated by the row: no bank conflicts
        if (live && visible(qpos, key0 + j)) { tmax = max(tmax, Ss[sb + r * ${u(SS)} + j] * scale2); }
      }
      tmax = row_max(tmax);
      var mr = m[i];
      al[i] = 1.0;
      if (l[i] == 0.0) {
        mr = max(mr, tmax);                 // nothing accumulated: O's row is zero, nothing to rescale
      } else if (tmax > mr + ${TH.toFixed(1)}) {
        al[i] = exp2(mr - tmax);
        mr = tmax;
        need = true;
      }
      var ls = 0.0;
      for (var x = 0u; x < ${u(KPL)}; x++) {
        let j = part + ((x + r) % ${u(KPL)}) * ${u(LPR)};   // rotated by the row: no bank conflicts
        var pj = 0.0;
        if (live && visible(qpos, key0 + j)) { pj = exp2(Ss[sb + r * ${u(SS)} + j] * scale2 - mr); }
        Ps[pb + r * ${u(PS)} + j] = f16(pj);
        ls += pj;
      }
      l[i] = l[i] * al[i] + row_sum(ls);
      m[i] = mr;
    }
    let sneed = subgroupAny(need);
    if (lane == 0u) { rflag[sg] = select(0u, 1u, sneed); }
    // B2, and the flags, uniform: Ps, Ks (next tile) and Vs visible
    let flags = workgroupUniformLoad(&rflag);
    if (${Array.from({ length: NSG }, (_, g) => `flags[${g}u] != 0u`).join(' || ')}) {
      // rare: O's rows times al through Ss, ${CB} column block(s) per round (every subgroup: al is 1 where nothing grew)`);
  for (let rd = 0; rd < ROUNDS; rd++) {
    const blocks = Array.from({ length: Math.min(CB, DN - rd * CB) }, (_, x) => rd * CB + x);
    for (let i = 0; i < FM; i++) for (const d of blocks) line(`      subgroupMatrixStore(&Ss, sb + ${u(i * SM_M * SS + (d - rd * CB) * SM_N)}, o_${i}_${d}, false, ${u(SS)});`);
    line(`      workgroupBarrier();
      for (var i = 0u; i < ${u(RPL)}; i++) {
        let r = lane % ${u(RS)} + i * SG;
        for (var x = 0u; x < ${u((blocks.length * SM_N) / LPR)}; x++) {
          let c = part + ((x + r) % ${u((blocks.length * SM_N) / LPR)}) * ${u(LPR)};
          Ss[sb + r * ${u(SS)} + c] *= al[i];
        }
      }
      workgroupBarrier();`);
    for (let i = 0; i < FM; i++) for (const d of blocks) line(`      o_${i}_${d} = subgroupMatrixLoad<${RESULT}>(&Ss, sb + ${u(i * SM_M * SS + (d - rd * CB) * SM_N)}, false, ${u(SS)});`);
    line(`      workgroupBarrier();`);
  }
  line(`    }

    // O += P V: P's left fragments from Ps, V's (key, d) rows as the right operand, each reused by ${FM} row block(s)`);
  for (let i = 0; i < FM; i++) for (let kk = 0; kk < KK; kk++) line(`    let pf_${i}_${kk} = subgroupMatrixLoad<${LEFT}>(&Ps, pb + ${u(i * SM_M * PS + kk * SM_K)}, false, ${u(PS)});`);
  for (let d = 0; d < DN; d++) {
    for (let kk = 0; kk < KK; kk++) {
      line(`    let vt_${d}_${kk} = subgroupMatrixLoad<${RIGHT}>(&Vs, ${u(kk * SM_K * DS + d * SM_N)}, false, ${u(DS)});`);
      for (let i = 0; i < FM; i++) line(`    o_${i}_${d} = subgroupMatrixMultiplyAccumulate(pf_${i}_${kk}, vt_${d}_${kk}, o_${i}_${d});`);
    }
  }
  line(`  }

  // epilogue: O / l to out through Ss, ${CB} column block(s) per round`);
  for (let rd = 0; rd < ROUNDS; rd++) {
    const blocks = Array.from({ length: Math.min(CB, DN - rd * CB) }, (_, x) => rd * CB + x);
    for (let i = 0; i < FM; i++) for (const d of blocks) line(`  subgroupMatrixStore(&Ss, sb + ${u(i * SM_M * SS + (d - rd * CB) * SM_N)}, o_${i}_${d}, false, ${u(SS)});`);
    line(`  workgroupBarrier();
  for (var i = 0u; i < ${u(RPL)}; i++) {
    let r = lane % ${u(RS)} + i * SG;
    let qi = q0 + sg * ${u(RS)} + r;
    if (qi < p.Lq) {
      let inv = select(0.0, 1.0 / l[i], l[i] > 0.0);
      let ob = p.out_off + ((bz * p.Hq + h) * p.Lq + qi) * ${u(D)} + ${u(rd * CB * SM_N)};
      for (var x = 0u; x < ${u((blocks.length * SM_N) / LPR)}; x++) {
        let c = part + ((x + r) % ${u((blocks.length * SM_N) / LPR)}) * ${u(LPR)};
        out[ob + c] = T(Ss[sb + r * ${u(SS)} + c] * inv);
      }
    }
  }
  workgroupBarrier();`);
  }
  line(`}`);
  return L.join('\n') + '\n';
}
