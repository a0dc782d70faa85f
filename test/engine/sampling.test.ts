// Sampling helpers vs the float64 reference: greedy, top-k with temperature from the same uniform draws,
// repetition penalty (HF semantics, duplicates and padding ids), logits views, determinism per (seed, step).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gather, uploadIds } from '../../src/engine/ops/layout';
import { readIds, sample, samplingUniform } from '../../src/engine/ops/sampling';
import { argmaxRef } from './reference/reduce';
import { sampleRef, uniformRef } from './reference/sampling';
import { randomHost, seeded, testEngine, uploadAs, type Layout } from './helpers';

test('samplingUniform matches the independent reference PCG', seeded((rng) => {
  for (let i = 0; i < 200; i++) {
    const [seed, step, row] = [rng.int(0, 2 ** 32 - 1), rng.int(0, 1e6), rng.int(0, 100)];
    assert.equal(samplingUniform(seed, step, row), uniformRef(seed, step, row), `(${seed}, ${step}, ${row})`);
  }
}));

for (const dtype of ['f32', 'f16'] as const) {
  test(`sample ${dtype}: greedy, top-k + temperature, repetition penalty, views`, seeded(async (rng) => {
    const e = await testEngine();
    const B = 3;
    for (const V of [1, 7, 257, 1000]) {
      for (const layout of ['contiguous', 'transposed', 'sliced'] as Layout[]) {
        const logits = randomHost(rng, [B, V], dtype, -4, 4);
        const gl = uploadAs(e, logits, dtype, layout);
        // greedy is exactly argmax
        const greedy = await e.read(sample(e, gl.view, { topK: 1 }));
        assert.deepEqual([...greedy], [...argmaxRef(logits).data], `greedy ${dtype} V=${V} ${layout}`);
        const k = rng.int(1, Math.min(64, V));
        const temperature = [0, 0.5, 1, 1.7][rng.int(0, 3)]!;
        const repetitionPenalty = [1, 1.3, 0.8][rng.int(0, 2)]!;
        const prev = Array.from({ length: B }, () => Array.from({ length: 9 }, () => rng.int(-1, V - 1)));
        prev[0]![1] = prev[0]![0]!; // a duplicate id is penalised once
        const gp = e.upload(prev.flat(), [B, 9], 'f32');
        const seed = rng.int(0, 2 ** 32 - 1);
        const step = rng.int(0, 5000);
        const opts = { topK: k, temperature, repetitionPenalty };
        const got = await e.read(sample(e, gl.view, { ...opts, prevTokens: gp, seed, step }));
        const u = [0, 1, 2].map((b) => uniformRef(seed, step, b));
        const want = sampleRef(logits, u, { ...opts, prev });
        for (let b = 0; b < B; b++) {
          // f32 (GPU) and float64 (reference) cumulative sums may straddle u only when it sits on a boundary
          if (got[b] !== want.tokens[b]) {
            assert.ok(want.margins[b]! < 1e-5, `sample ${dtype} V=${V} ${layout} ${JSON.stringify(opts)} row ${b}: got ${got[b]}, want ${want.tokens[b]} (margin ${want.margins[b]})`);
          }
        }
        gl.base.free();
        gp.free();
      }
    }
  }));
}

test('sample: the same (seed, step) gives the same tokens; a shared prev list applies to every row', seeded(async (rng) => {
  const e = await testEngine();
  const [B, V] = [8, 300];
  const logits = randomHost(rng, [B, V], 'f32', -1, 1);
  const gl = e.upload(logits.data, logits.shape, 'f32');
  const prev = [5, 17, 17, -1, 299];
  const gp = e.upload(prev, [prev.length], 'f32');
  const opts = { topK: 64, temperature: 1, repetitionPenalty: 1.5, prevTokens: gp };
  const a = await e.read(sample(e, gl, { ...opts, seed: 42, step: 7 }));
  const b = await e.read(sample(e, gl, { ...opts, seed: 42, step: 7 }));
  assert.deepEqual([...a], [...b]);
  const u = Array.from({ length: B }, (_, r) => uniformRef(42, 7, r));
  const want = sampleRef(logits, u, { topK: 64, temperature: 1, repetitionPenalty: 1.5, prev: Array.from({ length: B }, () => prev) });
  for (let r = 0; r < B; r++) if (a[r] !== want.tokens[r]) assert.ok(want.margins[r]! < 1e-5, `row ${r}: got ${a[r]}, want ${want.tokens[r]}`);
  const c = await e.read(sample(e, gl, { ...opts, seed: 42, step: 8 }));
  assert.notDeepEqual([...a], [...c], 'another step draws other tokens (8 rows of top-64)');
}));

// intIds: ids as int32 bits (uploadIds' layout) both ways, so a draw feeds gather on the GPU. prev is a strided
// column of an id table, out a slot in the same table (poisoned around it), the drawn id is then embedded by
// gather straight from the slot; tokens must equal the f32 path's for the same key (same shader logic).
for (const dtype of ['f32', 'f16'] as const) {
  test(`sample ${dtype} intIds: int32 prev from a strided table, int32 out into a slot gather reads`, seeded(async (rng) => {
    const e = await testEngine();
    for (const V of [5, 263, 1031]) {
      const [P, G] = [7, 3]; // table rows x columns: column 0 is the history, slot (P, 0) the next id
      const logits = randomHost(rng, [1, V], dtype, -3, 3);
      const gl = uploadAs(e, logits, dtype, 'sliced');
      const prev = Array.from({ length: P }, () => rng.int(-1, V - 1));
      prev[3] = prev[1]!; // a duplicate id is penalised once
      const POISON = -7;
      const table = uploadIds(e, Array.from({ length: (P + 1) * G }, (_, i) => (i % G === 0 && i / G < P ? prev[i / G]! : POISON)));
      const history = table.slice(0, 0, P * G, G).unsqueeze(0); // (1, P), stride G
      const slot = table.slice(0, P * G, P * G + 1);
      const opts = { topK: rng.int(1, Math.min(64, V)), temperature: [0, 0.7, 1.3][rng.int(0, 2)]!, repetitionPenalty: [1.4, 0.7][rng.int(0, 1)]!, seed: rng.int(0, 2 ** 32 - 1), step: rng.int(0, 9999) };
      sample(e, gl.view, { ...opts, prevTokens: history, out: slot, intIds: true });
      const ids = await readIds(e, table);
      const want = sampleRef(logits, [uniformRef(opts.seed, opts.step, 0)], { ...opts, prev: [prev] });
      const got = ids[P * G]!;
      if (got !== want.tokens[0]) assert.ok(want.margins[0]! < 1e-5, `intIds ${dtype} V=${V} ${JSON.stringify(opts)}: got ${got}, want ${want.tokens[0]} (margin ${want.margins[0]})`);
      assert.deepEqual([...ids].filter((_, i) => i !== P * G && !(i % G === 0 && i / G < P)), new Array((P + 1) * G - P - 1).fill(POISON), 'only the slot is written');
      // the same key through the f32 path (f32 prev values) draws the same id
      const fprev = e.upload(prev, [1, P], 'f32');
      const f = await e.read(sample(e, gl.view, { ...opts, prevTokens: fprev }));
      assert.equal(got, f[0], 'intIds and f32 ids pick the same token');
      // gather embeds the drawn id from its slot: table rows of a random [V, 5] embedding, bit-exact
      const emb = randomHost(rng, [V, 5], dtype);
      const ge = e.upload(emb.data, emb.shape, dtype);
      const row = await e.read(gather(e, ge, slot));
      assert.deepEqual([...row], [...emb.data.subarray(got * 5, got * 5 + 5)], `gather of the sampled id ${got}`);
      for (const t of [gl.base, table, fprev, ge]) t.free();
    }
  }));
}

test('sample: input checks name the op and the shapes', async () => {
  const e = await testEngine();
  const l = e.empty([2, 10]);
  assert.throws(() => sample(e, l, { topK: 65 }), /sample: topK 65 for logits\[2,10\] must be 1..10/);
  assert.throws(() => sample(e, e.empty([10])), /sample: logits\[10\] must be \(B, V\)/);
  assert.throws(() => sample(e, l, { repetitionPenalty: 1.2, prevTokens: e.empty([3, 4]) }), /prevTokens f32\[3,4\] must be f32 \(2, P\)/);
});
