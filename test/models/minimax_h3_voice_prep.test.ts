// A voice put onto the audio VAE's 32 kHz (voice-inputs.ts prepareVoice) and torchaudio's resampler
// (common/torchaudio-resample.ts) against upstream (golden minimax_h3/voice_prep, tools/golden/minimax_h3_voice_prep.py:
// diffusers' MiniMaxH3Ref2VASetupStep with torchaudio's Resample): lengths exact, samples within the stated tolerance,
// torchaudio's cached kernel within one float32 ulp where the case holds it. Every case of the folder, no constants of
// its own: the rates, frames and lengths come from the fixture.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resampleKernel, resampledLength, torchaudioResample } from '../../src/models/common/torchaudio-resample';
import { prepareVoice, voiceSamples } from '../../src/models/minimax_h3/conditioning/voice-inputs';
import { goldenTests } from './golden';

function rows(data: Float64Array, channels: number): Float32Array[] {
  const n = data.length / channels;
  return Array.from({ length: channels }, (_, c) => Float32Array.from(data.subarray(c * n, (c + 1) * n)));
}

goldenTests('minimax_h3', 'voice_prep', async (c) => {
  const cfg = c.config as { sample_rate: number; target_rate: number; num_frames: number; fps: number; width: number };
  assert.equal(cfg.fps, 24, 'the service runs at 24 fps');
  const input = await c.input('waveform');
  const want = await c.output('waveform');
  const inCh = input.shape[0]!;
  const got = prepareVoice(rows(input.data, inCh), cfg.sample_rate, cfg.num_frames, cfg.target_rate);
  assert.deepEqual([2, got[0].length], want.shape, 'stereo, of upstream\'s length');
  const n = want.shape[1]!;
  const kept = Math.min(voiceSamples(cfg.num_frames, cfg.sample_rate), input.shape[1]!);
  assert.equal(n, cfg.sample_rate === cfg.target_rate ? kept : resampledLength(kept, resampleKernel(cfg.sample_rate, cfg.target_rate)), 'truncated, then resampled');
  const { atol, rtol } = c.tol('f32');
  let worst = 0;
  for (let ch = 0; ch < 2; ch++) {
    for (let i = 0; i < n; i++) {
      const w = want.data[ch * n + i]!;
      const d = Math.abs(got[ch]![i]! - w);
      worst = Math.max(worst, d);
      if (d > atol + rtol * Math.abs(w)) assert.fail(`channel ${ch} sample ${i}: got ${got[ch]![i]}, want ${w} (|d| ${d.toExponential(2)} > ${atol})`);
    }
  }
  if (inCh === 1) assert.deepEqual(got[1], got[0], 'a mono clip is repeated on both channels');
  if (c.has('output', 'kernel')) {
    const k = resampleKernel(cfg.sample_rate, cfg.target_rate);
    const wk = await c.output('kernel');
    assert.deepEqual(wk.shape, [k.new, 1, k.taps], 'kernel shape');
    assert.equal(k.width, cfg.width, 'width');
    let off = 0;
    for (let i = 0; i < wk.data.length; i++) {
      const d = Math.abs(k.data[i]! - wk.data[i]!);
      if (d > 0) off++;
      if (d > 2 ** -23 * Math.abs(wk.data[i]!) + 1e-45) assert.fail(`kernel[${i}]: got ${k.data[i]}, want ${wk.data[i]}`);
    }
    console.log(`  ${c.name}: kernel ${k.new}x${k.taps}, ${off} of ${wk.data.length} values one ulp off`);
  }
  console.log(`  ${c.name}: ${input.shape.join('x')} at ${cfg.sample_rate} Hz -> 2x${n}, max |d| ${worst.toExponential(2)}`);
});

test('torchaudio resample: equal rates give the input back; lengths ceil(new x L / orig); rates are whole Hz', () => {
  const x = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i / 3));
  assert.equal(torchaudioResample(x, 32000, 32000), x);
  assert.equal(torchaudioResample(x, 48000, 32000).length, 67); // ceil(2 x 100 / 3)
  assert.equal(torchaudioResample(x, 22050, 32000).length, 146); // ceil(640 x 100 / 441) = ceil(145.12)
  assert.throws(() => resampleKernel(44100.5, 32000), /whole number of Hz/);
  assert.throws(() => torchaudioResample(x, 48000, 32000, resampleKernel(44100, 32000)), /a 441:320 kernel/);
});

test('torchaudio resample: a 1 kHz tone keeps its amplitude and phase away from the edges (8 kHz -> 32 kHz, 48 kHz -> 32 kHz)', () => {
  for (const rate of [8000, 48000]) {
    const x = Float32Array.from({ length: rate / 10 }, (_, i) => Math.sin((2 * Math.PI * 1000 * i) / rate));
    const y = torchaudioResample(x, rate, 32000);
    let worst = 0;
    for (let i = 200; i < y.length - 200; i++) worst = Math.max(worst, Math.abs(y[i]! - Math.sin((2 * Math.PI * 1000 * i) / 32000)));
    // the 0.99 roll-off's Hann-windowed sinc passes 1 kHz within a few 1e-3
    assert.ok(worst < 0.01, `${rate} Hz: max error ${worst}`);
  }
});
