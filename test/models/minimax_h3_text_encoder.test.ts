// MiniMax H3's text encoder (src/models/minimax_h3/text-encoder/encoder.ts) against diffusers' get_qwen3vl_prompt_embeds
// on a tiny Qwen3-VL (hidden_states[3] of 4 layers standing for [50] of 64; tools/golden/minimax_h3_text.py), in
// f32 and f16; the loader's reads (only embed_tokens and layers < N, from the fixture and from the released
// index's key list); and the T2VA presentation (the prompt verbatim, no template, no special tokens).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import type { Checkpoint } from '../../src/engine/safetensors';
import { H3_TEXT_ENCODER_LAYER, H3TextEncoder } from '../../src/models/minimax_h3/text-encoder/encoder';
import { parseQwen3Config } from '../../src/models/qwen3';
import { TextTokenizer, type TokenizerConfigJson } from '../../src/models/tokenizer';
import { testEngine } from '../engine/helpers';
import { goldenTests, repoRoot, WEIGHT_PREFIX, type GoldenCase } from './golden';

/** The checkpoint, with every tensor name any method is asked about recorded. */
function recording(ckpt: Checkpoint): { ckpt: Checkpoint; asked: Set<string> } {
  const asked = new Set<string>();
  const proxy = new Proxy(ckpt, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function' || prop === 'keys') return v;
      return (...args: unknown[]) => {
        if (typeof args[0] === 'string') asked.add(args[0]);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { ckpt: proxy, asked };
}

function caseLayer(c: GoldenCase): number {
  const n = c.config.text_encoder_layer;
  assert.ok(typeof n === 'number', 'fixture config has text_encoder_layer');
  return n;
}

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests('minimax_h3', 'text_encoder', async (c) => {
    const e = await testEngine();
    const config = parseQwen3Config(c.config, 'text', c.path);
    const layer = caseLayer(c);
    assert.ok(layer < config.numLayers);
    const { ckpt, asked } = recording(c.ckpt);
    const prefix = WEIGHT_PREFIX + config.keyPrefix;
    const enc = await H3TextEncoder.load(e, ckpt, config, { dtype, prefix, layer });
    try {
      assert.equal(enc.model.layers.length, layer);
      // only embed_tokens and layers < layer; the fixture holds the later layer and the norm, never asked for
      assert.ok(c.has('weight', `${config.keyPrefix}layers.${layer}.mlp.up_proj.weight`) && c.has('weight', `${config.keyPrefix}norm.weight`));
      for (const k of asked) {
        const m = /\.layers\.(\d+)\./.exec(k);
        assert.ok(m ? Number(m[1]) < layer : k === `${prefix}embed_tokens.weight`, `loader asked for ${k}`);
      }
      assert.ok(asked.has(`${prefix}layers.${layer - 1}.mlp.down_proj.weight`));

      const ids = (await c.ints('ids')).data;
      const out = enc.encode(ids);
      const got = await e.read(out);
      out.free();
      const want = await c.output('prompt_embeds');
      assert.deepEqual(out.shape, want.shape);
      c.expect(dtype, got, want, 'prompt_embeds', `prompt_embeds (${dtype})`);
      // and not a neighbouring state: the layer before and the final norm's output are far from it (10x the f16
      // allowance, which is wider than the f32 one)
      const wide = c.f16Allowance('prompt_embeds').atol;
      for (const other of [`hidden_states.${layer - 1}`, 'last_hidden_state']) {
        const o = await c.output(other);
        assert.ok(o.data.some((v, i) => Math.abs(v - want.data[i]!) > 10 * wide), `${other} is distinguishable`);
      }
    } finally {
      enc.free();
    }
  }, dtype);
}

test('H3TextEncoder: the released config reads layer 50 of 64 under model.language_model.; 64 (post-norm) is refused', async () => {
  const real = parseQwen3Config({ model_type: 'qwen3_vl', text_config: { model_type: 'qwen3_vl_text', vocab_size: 151936, hidden_size: 5120, intermediate_size: 25600, num_hidden_layers: 64, num_attention_heads: 64, num_key_value_heads: 8, head_dim: 128, rms_norm_eps: 1e-6, rope_theta: 5000000, rope_scaling: { rope_type: 'default', mrope_section: [24, 20, 20], mrope_interleaved: true } } });
  assert.equal(real.keyPrefix, 'model.language_model.');
  assert.equal(H3_TEXT_ENCODER_LAYER, 50);
  const e = await testEngine();
  // a checkpoint that records every access and refuses every read
  const asked: string[] = [];
  const fake = new Proxy({} as Checkpoint, {
    get: (_t, prop) => (...args: unknown[]) => {
      asked.push(`${String(prop)}(${String(args[0])})`);
      if (prop === 'has') return true;
      throw new Error(`refused ${String(prop)}`);
    },
  });
  for (const layer of [64, 0, 2.5]) await assert.rejects(H3TextEncoder.load(e, fake, real, { layer }), RangeError);
  assert.equal(asked.length, 0, 'a refused layer reads nothing');
  await assert.rejects(H3TextEncoder.load(e, fake, real), /refused/);
  assert.ok(asked.some((k) => k.includes('model.language_model.embed_tokens.weight')), asked.join(', '));
});

test('H3TextEncoder.promptIds: the T2VA prompt verbatim, no chat template, no special tokens', () => {
  const dir = join(repoRoot(), 'test', 'fixtures', 'tokenizer');
  const tok = TextTokenizer.fromSources({
    vocab: JSON.parse(gunzipSync(readFileSync(join(dir, 'qwen-vocab.json.gz'))).toString('utf8')),
    merges: gunzipSync(readFileSync(join(dir, 'qwen-merges.txt.gz'))).toString('utf8'),
    config: JSON.parse(readFileSync(join(dir, 'minimax-h3.tokenizer_config.json'), 'utf8')) as TokenizerConfigJson,
  });
  const prompt = 'A red fox runs through snow at dawn, its breath visible; wind howls.';
  const ids = H3TextEncoder.promptIds(tok, prompt);
  assert.equal(tok.decode(ids), prompt);
  assert.ok(ids.every((i) => !tok.isSpecial(i)), 'no special token added');
  assert.notEqual(ids[0], tok.tokenId('<|im_start|>'));
  assert.throws(() => H3TextEncoder.promptIds(tok, ''), /no tokens/);
});
