// End-to-end golden of the MiniMax H3 text-to-video-with-sound pipeline (issue 19 item 5): upstream's modular
// pipeline (diffusers MiniMaxH3Blocks, t2va) and Kiln's service pipeline (MiniMaxH3Pipeline.run, f32, the base
// profile's loader: steps are grid points as upstream's num_inference_steps) on the same demo checkpoint, with the
// same initial video and audio latents (tools/golden/minimax_h3_pipeline.py; what is given to both and why:
// docs/models/minimax-h3.md "End-to-end golden"). Compared: the sampled latents, every decoded frame (output_type
// "pt", RGB in [0, 1]) and the stereo waveform, by the float32 rule against upstream's own float32-vs-float64 error on
// the whole pipeline.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { testEngine } from '../engine/helpers';
import { checkpointHashes, writeE2eCheckpoint } from './e2e-checkpoints';
import { goldenTests } from './golden';
import { recordingContext } from './run-context';

let scratch: string;
let dir: string;
before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'kiln-h3-e2e-'));
  dir = join(scratch, 'ckpt');
  await writeE2eCheckpoint(await testEngine(), 'minimax_h3', dir);
});
after(() => rmSync(scratch, { recursive: true, force: true }));

goldenTests('minimax_h3', 'pipeline', async (c) => {
  const cfg = c.config as {
    prompt: string; height: number; width: number; num_frames: number; num_inference_steps: number; checkpoint_sha256: Record<string, string>;
  };
  // the t2va golden reads no Ref2VA partition (transformer_ref/ and its Ref2VA adapters, added to the demo after it
  // was made); every other file must be the one it was made on
  const ref2va = (path: string) => path.startsWith('transformer_ref/') || path.startsWith('Minimax-h3-Turbo/ref2va-');
  const hashes = Object.fromEntries(Object.entries(checkpointHashes(dir)).filter(([path]) => !ref2va(path)));
  assert.deepEqual(hashes, cfg.checkpoint_sha256,
    'the demo checkpoint is not the one the golden was made on: regenerate it (tools/golden/minimax_h3_pipeline.py)');
  const videoNoise = await c.input('latents');
  const audioNoise = await c.input('audio_latents');
  let sampled: { video: Float32Array; audio: Float32Array } | undefined;
  const frames: Float32Array[] = [];
  let audio: Float32Array[] | undefined;
  const pipeline = new MiniMaxH3Pipeline({
    engine: testEngine,
    dirs: async () => h3DirsFromRoot(dir),
    // the base release's loader: steps count grid points, as upstream's num_inference_steps
    loadTransformer: (e, dirs, o) => loadH3Transformer(e, 'basevid50', { transformer: dirs.transformer }, { dtype: o.dtype }),
    dtype: 'f32',
    noise: (geo, C, A) => {
      assert.deepEqual(videoNoise.shape, [1, C, geo.numLatentFrames, geo.latentHeight, geo.latentWidth]);
      assert.deepEqual(audioNoise.shape, [2, A, geo.numAudioLatents]);
      return { video: Float32Array.from(videoNoise.data), audio: Float32Array.from(audioNoise.data) };
    },
    onSampled: (video, a) => (sampled = { video: video.data, audio: a.data }),
    onFrame: (frame, i) => (frames[i] = frame),
    onAudio: (channels, rate) => {
      assert.equal(rate, 32000);
      audio = channels;
    },
  });
  const task: H3Task = {
    prompt: cfg.prompt, seed: c.seed, steps: cfg.num_inference_steps, width: cfg.width, height: cfg.height, frames: cfg.num_frames,
    images: [], audios: [], outputPath: join(scratch, `${c.name}.mp4`),
  };
  try {
    await pipeline.run(task, recordingContext());
  } finally {
    await pipeline.unload();
  }

  c.expect('f32', sampled!.video, await c.output('latents'), 'latents');
  c.expect('f32', sampled!.audio, await c.output('audio_latents'), 'audio_latents');
  // output_type "pt": (1, frames, 3, H, W); Kiln's frames are [H, W, 3]
  const want = await c.output('videos');
  const [, F, C, H, W] = want.shape as [number, number, number, number, number];
  assert.equal(frames.length, F, 'frames');
  const got = new Float32Array(F * C * H * W);
  frames.forEach((f, t) => {
    for (let i = 0; i < H * W; i++) for (let ch = 0; ch < C; ch++) got[(t * C + ch) * H * W + i] = f[i * C + ch]!;
  });
  c.expect('f32', got, want, 'videos');
  // (1, 2, samples): left then right
  const wantAudio = await c.output('audio');
  assert.deepEqual(wantAudio.shape, [1, 2, audio![0]!.length]);
  const gotAudio = new Float32Array(2 * audio![0]!.length);
  gotAudio.set(audio![0]!, 0);
  gotAudio.set(audio![1]!, audio![0]!.length);
  c.expect('f32', gotAudio, wantAudio, 'audio');
});
