// The Qwen3-TTS code predictor against upstream golden vectors (test/fixtures/golden/qwen3_tts/code_predictor/):
// one frame from the talker's hidden state and codebook 0, greedy, each step's raw logits (lm_head[j]) and the 15
// codes, in f32 and f16. A repeated frame reuses its KV cache and creates no GPU buffer.
import assert from 'node:assert/strict';
import { loadTensor } from '../../src/engine/load';
import { concat, gather, uploadIds } from '../../src/engine/ops/layout';
import { readIds } from '../../src/engine/ops/sampling';
import type { Tensor } from '../../src/engine/tensor';
import { Qwen3TtsCodePredictor } from '../../src/models/qwen3_tts/code-predictor';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { CodeSampler } from '../../src/models/qwen3_tts/sampling';
import { testEngine } from '../engine/helpers';
import { expectClose, expectF16, goldenTests, WEIGHT_PREFIX } from './golden';

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests('qwen3_tts', 'code_predictor', async (c) => {
    const e = await testEngine();
    const config = parseQwen3TtsConfig(c.config, c.path);
    const H = config.talker.hiddenSize;
    const cp = await Qwen3TtsCodePredictor.load(e, c.ckpt, config, { dtype, prefix: WEIGHT_PREFIX });
    const table = await loadTensor(e, c.ckpt, `${WEIGHT_PREFIX}talker.model.codec_embedding.weight`, { dtype, shape: [config.talker.vocabSize, H] });
    const past = await c.input('past_hidden');
    const code0 = (await c.ints('code0')).data[0]!;
    const pastHidden = e.upload(past.data, past.shape, dtype);
    const code0Embed = gather(e, table, [code0]).reshape([1, 1, H]);
    const cache = cp.createCache();
    const sampler = new CodeSampler(e, config.codebookSize, { doSample: false, temperature: 1, topK: 1, seed: 0, groups: config.talker.numCodeGroups });
    const ids = uploadIds(e, new Array<number>(config.talker.numCodeGroups).fill(-1)); // where the picks land (int32)
    try {
      // the two-row prefill upstream hands its generate()
      const first = concat(e, [pastHidden, code0Embed], 1);
      c.expect(dtype, await e.read(first), await c.output('inputs_embeds'), 'inputs_embeds');
      first.free();

      const runFrame = async (record: boolean) => {
        const logits: number[] = [];
        const pick = async (l: Tensor, group: number) => {
          assert.deepEqual(l.shape, [1, config.codebookSize]);
          if (record) logits.push(...(await e.read(l)));
          return sampler.drawInto(l, 0, group, ids.slice(0, group, group + 1));
        };
        const sum = e.upload(new Float32Array(H), [1, 1, H], dtype);
        const r = await cp.predict(pastHidden, code0Embed, cache, pick, sum);
        sum.free();
        assert.deepEqual(r.codes.map((t) => t.offset), Array.from({ length: config.talker.numCodeGroups - 1 }, (_, i) => i + 1), 'predict returns the slots pick wrote');
        const codes = Array.from(await readIds(e, ids.slice(0, 1, config.talker.numCodeGroups)));
        return { sum: r.sum, codes, logits };
      };
      const a = await runFrame(true);
      c.expect(dtype, a.logits, await c.output('logits'), 'logits');
      assert.deepEqual(a.codes, Array.from((await c.output('codes')).data), `codes (${dtype})`);

      // the returned sum is the 15 codes' embeddings (codec_embedding[g-1][code_g]), what the talker's next input adds
      const want = new Float64Array(H);
      for (let g = 1; g < config.talker.numCodeGroups; g++) {
        const row = (await c.weight(`talker.code_predictor.model.codec_embedding.${g - 1}.weight`)).data.subarray(a.codes[g - 1]! * H, (a.codes[g - 1]! + 1) * H);
        for (let i = 0; i < H; i++) want[i] += row[i]!;
      }
      // a sum of table rows the fixture does not hold: f32 at the stated tolerance, f16 at float16's own rounding of
      // the rows (the rule's floor: upstream's f16 error on a value it never computes is taken as 0)
      const sum = { data: want, shape: [1, 1, H] };
      if (dtype === 'f32') expectClose(await e.read(a.sum!), sum, c.tol('f32'), 'embedding sum (f32)');
      else expectF16(await e.read(a.sum!), sum, { max: 0, rms: 0, peak: want.reduce((m, v) => Math.max(m, Math.abs(v)), 0) }, 'embedding sum (f16)');
      a.sum!.free();

      // frame 2 warms the pool up after the first frame's allocations; frame 3 must create no buffer
      (await runFrame(false)).sum!.free();
      e.pool.frozen = true;
      const created = e.pool.stats().buffersCreated;
      const b = await runFrame(false);
      b.sum!.free();
      assert.equal(e.pool.stats().buffersCreated, created, 'a code-predictor frame created GPU buffers');
      assert.deepEqual(b.codes, a.codes, 'the same frame twice gives the same codes (the cache is reset per frame)');
    } finally {
      e.pool.frozen = false;
      sampler.free();
      ids.free();
      cache.free();
      pastHidden.free();
      code0Embed.free();
      table.free();
      cp.free();
    }
  }, dtype);
}
