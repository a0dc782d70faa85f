// Turbo adapters merged at load (adapter.ts) on the golden cases' tiny transformer. The reference applies the
// adapter unmerged, in float64 on the CPU, on the *native fused* modules the published files are keyed to:
// y = W_fused x + B (A x), then the fused output is cut the way the model uses it (qkv: [q_all; k_all; v_all];
// fc1: [gate; value]). So the key mapping, the qkv split, the fc1 swap and the merge are all checked against math
// that never goes through adapter.ts. Then the whole forward: merged turbo_int8 (16-bit and int8) against a model
// loaded from weights the test merged itself.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { linear } from '../../src/engine/ops/linear';
import { Checkpoint } from '../../src/engine/safetensors';
import { lowRankProduct, mergeAdapter, openH3Adapter, writeDemoAdapter } from '../../src/models/minimax_h3/transformer/adapter';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { openH3Weights } from '../../src/models/minimax_h3/transformer/native-checkpoint';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { makeRng, testEngine } from '../engine/helpers';
import { expectClose, goldenCaseFiles, GoldenCase, goldenTests, WEIGHT_PREFIX } from './golden';
import { caseWeights, runCase, tmpDir, writeDiffusers, type HostWeight } from './minimax_h3_profiles-fixture';

/** The adapter file's pairs by native stem (diffusion_model. removed), float64 copies. */
async function readPairs(file: string): Promise<Map<string, { A: Float64Array; B: Float64Array; r: number }>> {
  const ck = await Checkpoint.open(file);
  const out = new Map<string, { A: Float64Array; B: Float64Array; r: number }>();
  for (const k of ck.keys()) {
    if (!k.endsWith('.lora_A.weight')) continue;
    const stem = k.slice('diffusion_model.'.length, -'.lora_A.weight'.length);
    const A = Float64Array.from(await ck.readFloat32(k));
    const B = Float64Array.from(await ck.readFloat32(`diffusion_model.${stem}.lora_B.weight`));
    out.set(stem, { A, B, r: ck.entry(k).shape[0]! });
  }
  await ck.close();
  return out;
}

/** Our modules fused the native way: [stem, rows of our module in the fused output, our key]. */
function fusedModules(c: H3Config): { stem: string; parts: { key: string; from: number; to: number }[] }[] {
  const inner = c.numHeads * c.headDim;
  const F = c.ffnDim;
  const out: { stem: string; parts: { key: string; from: number; to: number }[] }[] = [];
  const block = (ours: string, theirs: string) => {
    out.push({ stem: `${theirs}.attn.qkv_proj`, parts: ['to_q', 'to_k', 'to_v'].map((n, i) => ({ key: `${ours}.attn.${n}.weight`, from: i * inner, to: (i + 1) * inner })) });
    out.push({ stem: `${theirs}.attn.out_proj`, parts: [{ key: `${ours}.attn.to_out.0.weight`, from: 0, to: -1 }] });
    // fc1 fused = [gate; value]; ours = [value; gate]: handled by the caller via `swap`
    out.push({ stem: `${theirs}.mlp.fc1`, parts: [{ key: `${ours}.ff.net.0.proj.weight`, from: 0, to: 2 * F }] });
    out.push({ stem: `${theirs}.mlp.fc2`, parts: [{ key: `${ours}.ff.net.2.weight`, from: 0, to: -1 }] });
  };
  for (let i = 0; i < c.numLayers; i++) block(`transformer_blocks.${i}`, `blocks.${i}`);
  for (let i = 0; i < c.numRefinerLayers; i++) block(`token_refiner.refiner_blocks.${i}`, `token_refiner.blocks.${i}`);
  return out;
}

/** The fused native weight [N, K] of a module from our weights (qkv stacked, fc1 [gate; value]). */
function fusedWeight(w: Map<string, HostWeight>, m: ReturnType<typeof fusedModules>[number]): { W: Float64Array; N: number; K: number } {
  const parts = m.parts.map((p) => w.get(p.key)!);
  const K = parts[0]!.shape[1]!;
  let rows = parts.flatMap((p) => Array.from(p.data));
  if (m.stem.endsWith('mlp.fc1')) {
    const half = rows.length / 2;
    rows = [...rows.slice(half), ...rows.slice(0, half)];
  }
  return { W: Float64Array.from(rows), N: rows.length / K, K };
}

/** Float64 reference merge of every adapted module, cut back into our keys. */
function mergedReference(w: Map<string, HostWeight>, c: H3Config, pairs: Awaited<ReturnType<typeof readPairs>>): Map<string, HostWeight> {
  const out = new Map(w);
  for (const m of fusedModules(c)) {
    const p = pairs.get(m.stem);
    assert.ok(p, `demo adapter lacks ${m.stem}`);
    const { W, N, K } = fusedWeight(w, m);
    for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) for (let j = 0; j < p.r; j++) W[n * K + k]! += p.B[n * p.r + j]! * p.A[j * K + k]!;
    let rows = W;
    if (m.stem.endsWith('mlp.fc1')) rows = Float64Array.from([...W.slice((N / 2) * K), ...W.slice(0, (N / 2) * K)]);
    for (const part of m.parts) {
      const to = part.to < 0 ? N : part.to;
      out.set(part.key, { shape: [to - part.from, K], data: Float32Array.from(rows.subarray(part.from * K, to * K)) });
    }
  }
  return out;
}

const fixture = async () => {
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer')[0]!);
  return { c, cfg: parseH3Config(c.config, c.path) };
};

test('adapter: every merged linear equals W x + B (A x) on the fused native module (float64, unmerged)', async () => {
  const e = await testEngine();
  const { c, cfg } = await fixture();
  const file = join(tmpDir('adapter'), 'turbo.safetensors');
  await writeDemoAdapter(file, cfg, { rank: 3, seed: 7, magnitude: 0.5 });
  const pairs = await readPairs(file);
  const w = await caseWeights(c);
  const source = await openH3Weights(c.path, { prefix: WEIGHT_PREFIX });
  const merged = mergeAdapter(source, await openH3Adapter(file, cfg), { engine: e });
  const rng = makeRng(11);
  try {
    for (const m of fusedModules(cfg)) {
      const p = pairs.get(m.stem)!;
      const { W, N, K } = fusedWeight(w, m);
      const M = 3;
      const x = Float64Array.from({ length: M * K }, () => rng.next() * 2 - 1);
      // unmerged reference, fused module: y = x W^T + (x A^T) B^T
      const y = new Float64Array(M * N);
      for (let i = 0; i < M; i++) {
        const ax = new Float64Array(p.r);
        for (let j = 0; j < p.r; j++) for (let k = 0; k < K; k++) ax[j]! += p.A[j * K + k]! * x[i * K + k]!;
        for (let n = 0; n < N; n++) {
          let s = 0;
          for (let k = 0; k < K; k++) s += W[n * K + k]! * x[i * K + k]!;
          for (let j = 0; j < p.r; j++) s += p.B[n * p.r + j]! * ax[j]!;
          y[i * N + n] = s;
        }
      }
      const xs = e.upload(Float32Array.from(x), [M, K], 'f32');
      let base = 0;
      const ours = new Float64Array(M * N); // our modules' outputs laid back into the fused order
      for (const part of m.parts) {
        const to = part.to < 0 ? N : part.to;
        const wt = e.upload(await merged.view.readFloat32(WEIGHT_PREFIX + part.key), [to - part.from, K], 'f32');
        const got = await e.read(linear(e, xs, wt));
        wt.free();
        const n = to - part.from;
        for (let i = 0; i < M; i++) for (let r = 0; r < n; r++) ours[i * N + base + r] = got[i * n + r]!;
        base += n;
      }
      xs.free();
      if (m.stem.endsWith('mlp.fc1')) {
        // ours is [value; gate]; the fused output is [gate; value]
        const h = N / 2;
        const swapped = new Float64Array(M * N);
        for (let i = 0; i < M; i++) for (let r = 0; r < N; r++) swapped[i * N + ((r + h) % N)] = ours[i * N + r]!;
        ours.set(swapped);
      }
      expectClose(ours, { data: y, shape: [M, N] }, { atol: 1e-4, rtol: 1e-4 }, `${m.stem} merged vs unmerged`);
      // and the adapter is not negligible here, so a merge that dropped it would fail
      const plain = fusedWeight(w, m).W;
      let diff = 0;
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += plain[n * K + k]! * x[k]!;
        diff = Math.max(diff, Math.abs(s - y[n]!));
      }
      assert.ok(diff > 1e-3, `${m.stem}: the adapter changes the output (${diff})`);
    }
  } finally {
    await source.close();
    await c.close();
  }
});

test('adapter: the GPU low-rank product equals the CPU one; malformed adapters are refused', async () => {
  const e = await testEngine();
  const rng = makeRng(3);
  const [N, K, r] = [37, 29, 5];
  const d = { up: Float32Array.from({ length: N * r }, () => rng.next() - 0.5), down: Float32Array.from({ length: r * K }, () => rng.next() - 0.5), rank: r, scale: 0.75 };
  const cpu = await lowRankProduct(d, N, K);
  const gpu = await lowRankProduct(d, N, K, e);
  expectClose(gpu, { data: Float64Array.from(cpu), shape: [N, K] }, { atol: 1e-6, rtol: 1e-5 }, 'gpu vs cpu product');

  const { c, cfg } = await fixture();
  const dir = tmpDir('bad');
  const { writeSafetensors } = await import('../../src/engine/safetensors-writer');
  await writeSafetensors(join(dir, 'set.safetensors'), { 'diffusion_model.blocks.0.adaln_proj.linear.weight': { dtype: 'F32', shape: [2, 2], data: [1, 2, 3, 4] } });
  await assert.rejects(openH3Adapter(join(dir, 'set.safetensors'), cfg), /not LoRA pairs \(diffusion_model\.blocks\.0\.adaln_proj\.linear\.weight\)/);
  await writeSafetensors(join(dir, 'other.safetensors'), { 'diffusion_model.blocks.0.attn.foo.lora_A.weight': { dtype: 'F32', shape: [1, 2], data: [1, 2] }, 'diffusion_model.blocks.0.attn.foo.lora_B.weight': { dtype: 'F32', shape: [2, 1], data: [1, 2] } });
  await assert.rejects(openH3Adapter(join(dir, 'other.safetensors'), cfg), /blocks\.0\.attn\.foo is not a MiniMax H3 linear/);
  await c.close();
});

goldenTests('minimax_h3', 'transformer', async (c: GoldenCase) => {
  const e = await testEngine();
  const cfg = parseH3Config(c.config, c.path);
  const dir = tmpDir('turbo');
  const adapter = join(dir, 'turbo.safetensors');
  await writeDemoAdapter(adapter, cfg, { rank: 4, seed: 5, magnitude: 0.2 });
  const w = await caseWeights(c);
  const refDir = join(dir, 'merged');
  await writeDiffusers(refDir, c.config, mergedReference(w, cfg, await readPairs(adapter)));
  const transformer = join(dir, 'base');
  await writeDiffusers(transformer, c.config, w);

  const run = async (profile: 'turbo_int8' | 'basevid50', path: string, int8: boolean, withAdapter: boolean) => {
    const m = await loadH3Transformer(e, profile, { transformer: path, adapter: withAdapter ? adapter : undefined }, { dtype: 'f32', int8 });
    try {
      return await runCase(e, m, c);
    } finally {
      m.free();
    }
  };
  const want = await run('basevid50', refDir, false, false);
  const got = await run('turbo_int8', transformer, false, true);
  const same = { atol: 1e-5, rtol: 1e-4 };
  expectClose(got.video, { data: Float64Array.from(want.video), shape: [want.video.length] }, same, 'merged at load vs merged in float64 (video)');
  expectClose(got.audio, { data: Float64Array.from(want.audio), shape: [want.audio.length] }, same, 'merged at load vs merged in float64 (audio)');
  // int8 after the merge: against the 16-bit merged model with the fixture's int8 tolerance
  const q = await run('turbo_int8', transformer, true, true);
  expectClose(q.video, { data: Float64Array.from(want.video), shape: [want.video.length] }, c.tol('int8'), 'turbo_int8 (int8) vs merged f32');
  // the merge matters at this size: the base model's output is further away than the tolerance above
  const base = await run('basevid50', transformer, false, false);
  assert.throws(() => expectClose(base.video, { data: Float64Array.from(want.video), shape: [want.video.length] }, same, 'base'), /base/);
}, 'turbo adapter merged at load');
