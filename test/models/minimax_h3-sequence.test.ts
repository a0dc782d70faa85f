// MiniMax H3 packed sequence (sequence/packed-sequence.ts) and RoPE against the diffusers pipeline (golden minimax_h3/rope): frame
// arithmetic, the float64 position grid bit for bit, tags and row indices, the cos/sin tables, and the partial
// rotation (6F of the head dims) through the engine's rope op in f32 and f16.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rope } from '../../src/engine/ops/rope';
import { uploadRope } from '../../src/engine/rope-tables';
import { buildPackedSequence, checkPackedSequence, pairwiseSum, resolveGeometry, type KeyframeAnchor } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { h3InvFreq, h3RopeTable } from '../../src/models/minimax_h3/transformer/rope';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenTests } from './golden';
import { caseSequence, float64FromWords } from './minimax_h3-golden';

goldenTests('minimax_h3', 'rope', async (c) => {
  const { geometry, packed } = await caseSequence(c);
  for (const [name, got] of [['num_frames', geometry.numFrames], ['num_latent_frames', geometry.numLatentFrames], ['num_audio_latents', geometry.numAudioLatents]] as const) {
    assert.equal(got, (await c.output(name)).data[0], name);
  }
  checkPackedSequence(packed);

  // positions: every float64 bit
  const want = float64FromWords((await c.output('position_bits')).data);
  assert.equal(packed.positions.length, want.length, 'position count');
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(packed.positions[i], want[i])) {
      assert.fail(`position row ${Math.floor(i / 3)} axis ${i % 3}: got ${packed.positions[i]} want ${want[i]} (diff ${packed.positions[i]! - want[i]!})`);
    }
  }
  const ints = async (name: string) => Array.from((await c.output(name)).data);
  assert.deepEqual(Array.from(packed.tags), await ints('token_tags'), 'token_tags');
  assert.deepEqual(Array.from(packed.videoIndices), await ints('video_indices'), 'video_indices');
  assert.deepEqual(Array.from(packed.audioIndices), await ints('audio_indices'), 'audio_indices');
  assert.deepEqual(Array.from(packed.textIndices), await ints('text_indices'), 'text_indices');
  assert.equal(packed.numConditionVideoRows, (await c.output('num_condition_video_rows')).data[0]);
  assert.equal(packed.numConditionAudioRows, (await c.output('num_condition_audio_rows')).data[0]);

  // tables: upstream's cos/sin are [L, 6F] = the 3F angles twice (rotate-half); ours hold the 3F angles
  const F = c.config.rope_freq_dim as number;
  const invFreq = h3InvFreq(F, c.config.rope_theta as number);
  assert.deepEqual(Array.from(invFreq), Array.from((await c.output('inv_freq')).data), 'inv_freq (float32 bits)');
  const table = h3RopeTable(packed.positions, invFreq);
  for (const [name, mine] of [['cos', table.cos], ['sin', table.sin]] as const) {
    const up = await c.output(name);
    const [L, W] = up.shape as [number, number];
    assert.equal(W, 2 * table.pairs, `${name} width`);
    const doubled = new Float64Array(L * W);
    for (let l = 0; l < L; l++) for (let j = 0; j < W; j++) doubled[l * W + j] = mine[l * table.pairs + (j % table.pairs)]!;
    c.expect('f32', doubled, up, name);
  }

  if (c.has('input', 'q')) {
    const e = await testEngine();
    const q = await c.input('q');
    const wantQ = await c.output('q_rotated');
    const { cos, sin } = uploadRope(e, table);
    for (const dtype of ['f32', 'f16'] as const) {
      const x = e.upload(q.data, q.shape, dtype);
      const y = rope(e, x, cos, sin);
      c.expect(dtype, await e.read(y), wantQ, 'q_rotated', `q_rotated (${dtype})`);
      x.free();
      y.free();
    }
    cos.free();
    sin.free();
  }
});

test('frame arithmetic: 17k + 5 frames, 5k + 2 latent frames, 40 Hz audio latents', () => {
  const g = resolveGeometry(121, 768, 1344);
  assert.deepEqual(g, { numFrames: 124, numLatentFrames: 37, latentHeight: 48, latentWidth: 84, numAudioLatents: 207 });
  assert.equal(resolveGeometry(1, 352, 640).numFrames, 5);
  assert.throws(() => resolveGeometry(124, 360, 640), /multiples of 32/);
});

test('pairwiseSum is numpy order, not a running sum', () => {
  // 1 + 1e-16 * 16 in one accumulator loses every small term; pairwise keeps them in their own block
  const a = Float64Array.from({ length: 17 }, (_, i) => (i === 0 ? 1 : 1e-16));
  let seq = 0;
  for (const v of a) seq += v;
  assert.notEqual(pairwiseSum(a), seq);
  assert.equal(pairwiseSum(Float64Array.from([1, 2, 3])), 6);
});

test('buildPackedSequence refuses unknown anchors and foreign text tags', () => {
  const base = { numLatentFrames: 2, latentHeight: 4, latentWidth: 4, numAudioLatents: 3 };
  assert.throws(() => buildPackedSequence({ ...base, textTags: [1], keyframeAnchors: ['middle' as KeyframeAnchor] }), /'first' or 'last'/);
  assert.throws(() => buildPackedSequence({ ...base, textTags: [2] }), /text row 0 has tag 2/);
  const l = buildPackedSequence({ ...base, textTags: [1, 1] });
  l.videoIndices[0] = 0;
  assert.throws(() => checkPackedSequence(l), /claimed twice/);
});
