// End-to-end golden of the Qwen3-TTS voice-clone pipeline (issue 19 item 5): upstream's
// Qwen3TTSModel.generate_voice_clone and Kiln's service pipeline (Qwen3TtsPipeline.run, talker and code predictor in
// f32) on the same demo checkpoint and reference clip, greedy on both sides (tools/golden/qwen3_tts_pipeline.py; what
// is given to both and why: docs/models/qwen3-tts.md "End-to-end golden"). Compared: the generated codes (equal: every
// greedy pick's margin in upstream's scores is checked to be beyond what float32 rounding can flip) and the waveform
// (ICL: after the cut of the reference part) by the float32 rule against upstream's own float32-vs-float64 error on
// the whole pipeline.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { Qwen3TtsPipeline, type Qwen3TtsTask } from '../../src/models/qwen3_tts/pipeline';
import { testEngine } from '../engine/helpers';
import { checkpointHashes, writeE2eCheckpoint } from './e2e-checkpoints';
import { F32_RULE, goldenTests } from './golden';
import { recordingContext } from './run-context';

/**
 * int16 samples of the reference clip, in integer arithmetic only (xorshift32 noise, triangle waves under a
 * syllable-like envelope): the same as clip_samples in tools/golden/qwen3_tts_pipeline.py (Python's // floors).
 */
export function clipSamples(seconds: number, rate: number, seed: number): Int16Array {
  const n = seconds * rate;
  const out = new Int16Array(n);
  let x = seed >>> 0;
  const tri = (i: number, period: number, amp: number) => {
    const p = i % period;
    const h = Math.floor(period / 2);
    return Math.floor((amp * (4 * (p < h ? p : period - p) - period)) / period);
  };
  for (let i = 0; i < n; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    const env = tri(i, 4801, 1000) + 1000;
    const voiced = tri(i, 109, 3000) + tri(i, 218, 1500) + tri(i, 53, 600);
    const noise = (x >>> 22) - 512;
    const v = Math.floor((voiced * env) / 2000) + noise;
    out[i] = Math.max(-32768, Math.min(32767, v));
  }
  return out;
}

/** A canonical 16-bit mono PCM wav (44-byte header), byte for byte as the generator's wav_bytes. */
function wavBytes(samples: Int16Array, rate: number): Buffer {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((v, i) => data.writeInt16LE(v, i * 2));
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

let scratch: string;
let dir: string;
before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'kiln-tts-e2e-'));
  dir = join(scratch, 'ckpt');
  await writeE2eCheckpoint(await testEngine(), 'qwen3_tts', dir);
});
after(() => rmSync(scratch, { recursive: true, force: true }));

goldenTests('qwen3_tts', 'pipeline', async (c) => {
  const cfg = c.config as {
    text: string; language: string; ref_text: string | null; x_vector_only_mode: boolean; max_new_tokens: number;
    clip: { seconds: number; rate: number; seed: number }; clip_wav_sha256: string; checkpoint_sha256: Record<string, string>;
  };
  assert.deepEqual(checkpointHashes(dir), cfg.checkpoint_sha256,
    'the demo checkpoint is not the one the golden was made on: regenerate it (tools/golden/qwen3_tts_pipeline.py)');
  const wav = wavBytes(clipSamples(cfg.clip.seconds, cfg.clip.rate, cfg.clip.seed), cfg.clip.rate);
  assert.equal(createHash('sha256').update(wav).digest('hex'), cfg.clip_wav_sha256, 'the reference clip differs from the generator\'s');
  const refAudioPath = join(scratch, `${c.name}-ref.wav`);
  writeFileSync(refAudioPath, wav);

  // Greedy codes are comparable only where no pick is a near tie float32 rounding could flip: each pick's margin
  // (best minus runner-up of upstream's processed scores, float64 run) must exceed twice the float32 rule's allowance
  // on a score (the stated tolerance at the largest score, or F32_RULE.max x upstream's own f32 error on the scores).
  // A case that fails this is ill-posed (the generator refuses to write one), not a Kiln error.
  const margins = await c.output('margins');
  const e = c.f32Error('scores');
  assert.ok(e, 'the fixture records no f32_error for the scores');
  const tol = c.tol('f32');
  const bound = 2 * Math.max(tol.atol + tol.rtol * e.peak, F32_RULE.max * e.max);
  const closest = Math.min(...margins.data);
  assert.ok(closest > bound, `a greedy pick's margin ${closest.toExponential(3)} is within ${bound.toExponential(3)}: ill-posed case`);

  const chunks: number[][][] = [];
  let audio: Float32Array | undefined;
  const pipeline = new Qwen3TtsPipeline({
    engine: testEngine, checkpoint: async () => dir, dtype: 'f32',
    generation: { doSample: false, subtalkerDoSample: false, maxNewTokens: cfg.max_new_tokens },
    onCodes: (frames) => chunks.push(frames),
    onAudio: (samples) => (audio = samples),
  });
  const task: Qwen3TtsTask = {
    text: cfg.text, language: cfg.language, refText: cfg.ref_text ?? '', refAudioPath,
    outputPath: join(scratch, `${c.name}.wav`), seed: c.seed,
  };
  try {
    await pipeline.run(task, recordingContext());
  } finally {
    await pipeline.unload();
  }
  assert.equal(chunks.length, 1, 'one chunk (upstream does not split the text)');
  const want = await c.output('codes');
  const [frames, groups] = want.shape as [number, number];
  assert.deepEqual(chunks[0], Array.from({ length: frames }, (_, t) => Array.from(want.data.subarray(t * groups, (t + 1) * groups))),
    'greedy codes');
  const wantAudio = await c.output('audio');
  assert.equal(audio!.length, wantAudio.data.length, 'samples');
  c.expect('f32', audio!, wantAudio, 'audio');
});
