// parseH3Config on the real MiniMax H3 configs (diffusers and native naming) and on malformed ones.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { H3ConfigError, parseH3Config, videoPatchDim } from '../../src/models/minimax_h3/transformer/config';
import { goldenDir } from './golden';

const read = (name: string) => JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'configs'), name), 'utf8')) as Record<string, unknown>;

const RELEASED = {
  numHeads: 56, headDim: 128, hiddenSize: 5376, numLayers: 50, numRefinerLayers: 2, ffnDim: 14336, inChannels: 24,
  audioInChannels: 32, patchSize: [1, 2, 2], textDim: 5120, freqDim: 256, timeEmbedHiddenDim: 5376, timeEmbedDim: 2688,
  ropeFreqDim: 16, ropeTheta: 10000, normEps: 1e-5, qkNormEps: 1e-5, finalNormEps: 1e-5,
};

test('the diffusers transformer/config.json', () => {
  const c = parseH3Config(read('transformer.json'));
  assert.deepEqual(c, { format: 'diffusers', ...RELEASED });
  assert.equal(videoPatchDim(c), 96);
  assert.equal(6 * c.ropeFreqDim, 96, 'rotated head dims');
});

test('the native FL2VA config describes the same network', () => {
  assert.deepEqual(parseH3Config(read('fl2va-transformer.json')), { format: 'native', ...RELEASED });
});

test('malformed configs fail with the key named', () => {
  const good = read('transformer.json');
  assert.throws(() => parseH3Config({ ...good, num_layers: 0 }), (e: Error) => e instanceof H3ConfigError && /num_layers/.test(e.message));
  assert.throws(() => parseH3Config({ ...good, patch_size: [1, 2] }), /patch_size/);
  assert.throws(() => parseH3Config({ ...good, rope_freq_dim: 32 }), /exceed attention_head_dim/);
  assert.throws(() => parseH3Config({ ...good, _class_name: 'WanTransformer3DModel' }), /not a MiniMax H3/);
  assert.throws(() => parseH3Config({ ...read('fl2va-transformer.json'), adaln_out_features: 1 }), /adaln_out_features/);
  assert.throws(() => parseH3Config([]), /not a JSON object/);
});
