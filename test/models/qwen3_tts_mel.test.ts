// The speaker encoder's log-mel front end (src/models/qwen3_tts/mel.ts) against upstream's mel_spectrogram
// (test/fixtures/golden/qwen3_tts/mel/), plus the Slaney mel scale and filterbank against properties that follow
// from their definitions.
import { strict as assert } from 'node:assert';
import { after, test } from 'node:test';
import { Engine } from '../../src/engine/engine';
import {
  hannWindow, hzToMelSlaney, MelFrontEnd, melFrameCount, melMinSamples, melToHzSlaney, slaneyMelFilterbank, SPEAKER_MEL,
} from '../../src/models/qwen3_tts/mel';
import { goldenTests } from './golden';

let engine: Promise<Engine> | null = null;
const getEngine = () => (engine ??= Engine.create({ debug: true, allowSoftware: true }));
after(async () => (await engine)?.shutdown());

goldenTests('qwen3_tts', 'mel', async (c) => {
  const cfg = c.config as Record<string, number | boolean>;
  // The fixture's settings are the ones extract_speaker_embedding uses.
  assert.deepEqual(
    { sampleRate: cfg.sampling_rate, nFft: cfg.n_fft, hop: cfg.hop_size, win: cfg.win_size, nMels: cfg.num_mels, fmin: cfg.fmin, fmax: cfg.fmax },
    { ...SPEAKER_MEL },
  );
  assert.equal(cfg.center, false);
  const e = await getEngine();
  const wav = await c.input('waveform'); // [1, N]
  const want = await c.output('mel'); // [1, nMels, frames]
  assert.equal(want.shape[2], melFrameCount(wav.shape[1]!), 'frame count');
  const front = MelFrontEnd.create(e);
  const x = e.upload(wav.data, wav.shape, 'f32');
  const mel = front.run(e, x); // [1, frames, nMels]
  assert.deepEqual(mel.shape, [1, want.shape[2], want.shape[1]]);
  c.expect('f32', await e.read(mel.transpose(1, 2)), want, 'mel', `${c.name} log mel`);
  // The host path gives the same numbers.
  const viaHost = front.runHost(e, Float32Array.from(wav.data));
  assert.deepEqual(await e.read(viaHost), await e.read(mel));
  for (const t of [x, mel, viaHost]) t.free();
  front.free();
});

test('Slaney mel scale: linear to 1 kHz (15 mel), 27 mel per factor 6.4 above, inverse round trip', () => {
  assert.equal(hzToMelSlaney(0), 0);
  assert.ok(Math.abs(hzToMelSlaney(1000) - 15) < 1e-12);
  assert.ok(Math.abs(hzToMelSlaney(500) - 7.5) < 1e-12);
  assert.ok(Math.abs(hzToMelSlaney(6400) - 42) < 1e-12);
  assert.ok(Math.abs(hzToMelSlaney(6400 * 6.4) - 69) < 1e-12);
  for (const hz of [0, 37.5, 999.9, 1000, 1234.5, 12000]) assert.ok(Math.abs(melToHzSlaney(hzToMelSlaney(hz)) - hz) < 1e-9 * Math.max(1, hz));
});

test('Slaney filterbank: triangles on equally spaced mel edges, unit area in Hz', () => {
  const s = SPEAKER_MEL;
  const bins = s.nFft / 2 + 1;
  const fb = slaneyMelFilterbank(s);
  assert.equal(fb.length, s.nMels * bins);
  const binHz = s.sampleRate / s.nFft;
  const hiMel = hzToMelSlaney(s.fmax);
  for (let m = 0; m < s.nMels; m++) {
    const row = fb.subarray(m * bins, (m + 1) * bins);
    const left = melToHzSlaney((hiMel * m) / (s.nMels + 1));
    const right = melToHzSlaney((hiMel * (m + 2)) / (s.nMels + 1));
    for (let k = 0; k < bins; k++) {
      const f = k * binHz;
      if (f <= left || f >= right) assert.equal(row[k], 0, `band ${m} bin ${k} outside its edges`);
      else assert.ok(row[k]! > 0, `band ${m} bin ${k} inside its edges`);
    }
    // A triangle of height 2 / (right - left) sampled every binHz: area 1 when the band spans many bins.
    if (right - left > 20 * binHz) {
      const area = row.reduce((a, v) => a + v, 0) * binHz;
      assert.ok(Math.abs(area - 1) < 0.01, `band ${m} area ${area}`);
    }
  }
  // Nothing above fmax (12 kHz = the last bin here).
  assert.equal(fb[(s.nMels - 1) * bins + bins - 1], 0);
});

test('periodic Hann window and frame count as torch computes them', () => {
  const w = hannWindow(8);
  assert.deepEqual(Array.from(w, (v) => Math.round(v * 1e12) / 1e12), [0, 0.146446609407, 0.5, 0.853553390593, 1, 0.853553390593, 0.5, 0.146446609407]);
  assert.equal(melFrameCount(24000), 93);
  assert.equal(melFrameCount(5003), 19);
  assert.equal(melMinSamples(), 385);
});

test('mel front end refuses waveforms reflect padding cannot take, and non-f32 input', async () => {
  const e = await getEngine();
  const front = MelFrontEnd.create(e);
  assert.throws(() => front.runHost(e, new Float32Array(384)), /384 samples; reflect padding needs at least 385/);
  const h = e.upload(new Float32Array(500), [500], 'f16');
  assert.throws(() => front.run(e, h), /mel: waveform f16\[500\] must be f32/);
  h.free();
  front.free();
});
