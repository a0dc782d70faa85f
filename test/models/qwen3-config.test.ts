// parseQwen3Config on the real checkpoints' config.json files (test/fixtures/golden/qwen3/configs) and on
// configs it must refuse loudly.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseQwen3Config, Qwen3ConfigError } from '../../src/models/qwen3';
import { goldenDir } from './golden';

const real = (name: string): Record<string, unknown> => JSON.parse(readFileSync(join(goldenDir('qwen3', 'configs'), name), 'utf8'));

test('Qwen3-VL-4B (Krea 2 text encoder): nested text_config, interleaved MRoPE [24, 20, 20]', () => {
  const c = parseQwen3Config(real('qwen3-vl-4b-instruct.json'));
  assert.deepEqual(
    { ...c },
    {
      modelType: 'qwen3_vl_text', vocabSize: 151936, hiddenSize: 2560, intermediateSize: 9728, numLayers: 36, numHeads: 32, numKvHeads: 8,
      headDim: 128, rmsNormEps: 1e-6, attentionBias: false, keyPrefix: 'model.language_model.',
      rope: { kind: 'mrope', theta: 5000000, section: [24, 20, 20], mode: 'interleaved' },
    },
  );
});

test('MiniMax H3 text encoder (Qwen3-VL-32B): 64 layers, hidden 5120', () => {
  const c = parseQwen3Config(real('minimax-h3-text-encoder.json'));
  assert.equal(c.numLayers, 64);
  assert.equal(c.hiddenSize, 5120);
  assert.equal(c.numHeads, 64);
  assert.equal(c.intermediateSize, 25600);
  assert.equal(c.keyPrefix, 'model.language_model.');
});

test('Qwen3-TTS talker (0.6B, 1.7B): talker_config, rope_scaling.interleaved, keys under talker.model.', () => {
  for (const [file, hidden, ffn] of [['qwen3-tts-12hz-0.6b-base.json', 1024, 3072], ['qwen3-tts-12hz-1.7b-base.json', 2048, 6144]] as const) {
    const c = parseQwen3Config(real(file));
    assert.equal(c.modelType, 'qwen3_tts_talker');
    assert.equal(c.keyPrefix, 'talker.model.');
    assert.equal(c.hiddenSize, hidden);
    assert.equal(c.intermediateSize, ffn);
    assert.equal(c.numLayers, 28);
    assert.equal(c.numKvHeads, 8);
    assert.equal(c.headDim, 128);
    assert.equal(c.vocabSize, 3072);
    assert.deepEqual(c.rope, { kind: 'mrope', theta: 1000000, section: [24, 20, 20], mode: 'interleaved' });
  }
});

test('Qwen3-TTS code predictor: 1D RoPE, 5 layers, keys under talker.code_predictor.model.', () => {
  const c = parseQwen3Config(real('qwen3-tts-12hz-0.6b-base.json'), 'code_predictor');
  assert.equal(c.keyPrefix, 'talker.code_predictor.model.');
  assert.equal(c.numLayers, 5);
  assert.equal(c.hiddenSize, 1024);
  assert.equal(c.vocabSize, 2048);
  assert.deepEqual(c.rope, { kind: '1d', theta: 1000000 });
});

test('TTS talker with interleaved false uses sectioned MRoPE', () => {
  const j = real('qwen3-tts-12hz-0.6b-base.json') as { talker_config: { rope_scaling: Record<string, unknown> } };
  j.talker_config.rope_scaling.interleaved = false;
  assert.equal((parseQwen3Config(j).rope as { mode: string }).mode, 'sectioned');
});

test('refuses what it cannot build, naming the field', () => {
  const base = { model_type: 'qwen3', vocab_size: 10, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4 };
  assert.doesNotThrow(() => parseQwen3Config(base));
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ ...base, model_type: 'llama' }, /model_type "llama" is not a Qwen3 decoder/],
    [{ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } }, /rope_type "yarn" is not supported/],
    [{ ...base, rope_parameters: { rope_type: 'default', rope_theta: 1e4, mrope_section: [1, 1, 0] } }, /mrope_section on a 1D-RoPE/],
    [{ ...base, num_key_value_heads: 3 }, /not a multiple of 3 KV heads/],
    [{ ...base, hidden_act: 'gelu' }, /hidden_act "gelu"/],
    [{ ...base, use_sliding_window: true }, /use_sliding_window/],
    [{ ...base, layer_types: ['sliding_attention'] }, /only full_attention/],
    [{ ...base, hidden_size: 0 }, /hidden_size = 0/],
    [{ ...base, model_type: 'qwen3_vl_text', rope_parameters: { rope_theta: 1e4, mrope_section: [1, 1, 1] } }, /sums to 3, head_dim\/2 is 2/],
    [{ model_type: 'qwen3_vl' }, /has no text_config/],
  ];
  for (const [cfg, re] of bad) assert.throws(() => parseQwen3Config(cfg), (e: Error) => e instanceof Qwen3ConfigError && re.test(e.message), JSON.stringify(cfg));
});
