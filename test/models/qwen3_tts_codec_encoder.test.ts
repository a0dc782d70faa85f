// The 12 Hz codec encoder (Mimi: 24 kHz -> codes) against upstream Qwen3TTSTokenizerV2Model.encode at a tiny config
// (test/fixtures/golden/qwen3_tts/codec_encoder): the SEANet output, the transformer, the downsample (fixture
// tolerance), every RVQ stage's codes and the 16 kept codebooks (exactly: the generator picked a clip window whose
// nearest / second-nearest code distances differ by >= 0.005 at every stage). Also the ELU built from engine ops
// against float64 on fresh random inputs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CodecEncoder, type CodecEncoderTrace } from '../../src/models/qwen3_tts/codec';
import { elu } from '../../src/models/qwen3_tts/codec/activations';
import { parseSpeechTokenizerConfig } from '../../src/models/qwen3_tts/config';
import { assertClose, randomHost, seeded, testEngine, uploadAs } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';

/** A channels-last (1, L, C) result as the fixture's (1, C, L). */
function channelsFirst(data: Float32Array, L: number, C: number): Float32Array {
  const out = new Float32Array(L * C);
  for (let l = 0; l < L; l++) for (let c = 0; c < C; c++) out[c * L + l] = data[l * C + c]!;
  return out;
}

goldenTests('qwen3_tts', 'codec_encoder', async (c) => {
  const e = await testEngine();
  const cfg = parseSpeechTokenizerConfig(c.config, `${c.path} config`);
  const wav = await c.input('waveform'); // (1, N)
  const all = await c.output('all_codes'); // (1, num_quantizers, frames)
  const [, nqAll, framesAll] = all.shape as [number, number, number];

  // every RVQ stage of the checkpoint (20 here), so a wrong residual update shows past the kept 16
  const enc = await CodecEncoder.load(e, c.ckpt, cfg, { prefix: WEIGHT_PREFIX, quantizers: nqAll });
  try {
    const trace: CodecEncoderTrace = new Map();
    const { codes, frames } = await enc.encode(Float32Array.from(wav.data), trace);
    for (const name of ['conv', 'transformer', 'downsample']) {
      const t = trace.get(name)!;
      const [, L, C] = t.shape as [number, number, number];
      const got = await e.read(t);
      c.expect('f32', name === 'transformer' ? got : channelsFirst(got, L, C), await c.output(name), name);
    }
    for (const t of new Set(trace.values())) t.free();
    assert.equal(frames, Math.min(framesAll, Math.ceil(wav.shape[1]! / 1920)));
    for (let q = 0; q < nqAll; q++) {
      const got = Array.from({ length: frames }, (_, t) => codes[t * nqAll + q]);
      const want = Array.from({ length: frames }, (_, t) => all.data[q * framesAll + t]);
      assert.deepEqual(got, want, `all_codes: RVQ stage ${q}`);
    }
  } finally {
    enc.free();
  }

  // the public API: the first 16 codebooks (encoder_valid_num_quantizers), ceil(N / 1920) frames
  const kept = await CodecEncoder.load(e, c.ckpt, cfg, { prefix: WEIGHT_PREFIX });
  try {
    assert.equal(kept.numQuantizers, cfg.encoderValidNumQuantizers);
    const inUse = e.pool.stats().inUseBytes;
    const { codes, frames } = await kept.encode(Float32Array.from(wav.data));
    assert.equal(e.pool.stats().inUseBytes, inUse, 'encode() leaves no tensor behind');
    const want = await c.output('codes'); // (frames, 16)
    assert.deepEqual([frames, cfg.encoderValidNumQuantizers], want.shape);
    assert.deepEqual(Array.from(codes), Array.from(want.data), 'codes (frames, 16)');
    await assert.rejects(kept.encode(new Float32Array(0)), /codec encode: empty waveform/);
  } finally {
    kept.free();
  }
});

test('codec elu (from engine ops) vs float64, odd sizes and a strided view', seeded(async (rng) => {
  const e = await testEngine();
  for (const shape of [[1, 7, 3], [2, 33, 5], [1, 129, 1]]) {
    const x = randomHost(rng, shape, 'f32', -30, 8);
    const g = uploadAs(e, x, 'f32', 'transposed');
    const out = elu(e, g.view);
    const want = { data: x.data.map((v) => (v > 0 ? v : Math.expm1(v))), shape };
    // e^m from a softmax ratio: a few f32 roundings of values <= 1
    assertClose(await e.read(out), want, { atol: 1e-6, rtol: 1e-5 }, `elu ${JSON.stringify(shape)}`);
    out.free();
    g.base.free();
  }
}));
