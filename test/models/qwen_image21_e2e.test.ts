// End-to-end golden of the Qwen-Image-2.1 pipeline (issue 19 item 5): upstream's QwenImage21Pipeline.__call__ and
// Kiln's service pipeline (QwenImage21Pipeline.run, f32) on the same demo checkpoint, with the same initial latents
// and reference PNG (tools/golden/qwen_image21_pipeline.py; what is given to both and why: docs/models/
// qwen-image-2.1.md "End-to-end golden"). Compared: the final latents and the picture (output_type "pt": RGBA in
// [0, 1]) by the float32 rule against upstream's own float32-vs-float64 error on the whole pipeline.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { testEngine } from '../engine/helpers';
import { checkpointHashes, writeE2eCheckpoint } from './e2e-checkpoints';
import { goldenTests } from './golden';
import { recordingContext } from './run-context';

let scratch: string;
let dir: string;
before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'kiln-qi21-e2e-'));
  dir = join(scratch, 'ckpt');
  await writeE2eCheckpoint(await testEngine(), 'qwen_image21', dir);
});
after(() => rmSync(scratch, { recursive: true, force: true }));

goldenTests('qwen_image21', 'pipeline', async (c) => {
  const cfg = c.config as {
    prompt: string; negative_prompt: string; true_cfg_scale: number; num_inference_steps: number; width: number; height: number;
    output_resolution?: number; checkpoint_sha256: Record<string, string>;
  };
  assert.deepEqual(checkpointHashes(dir), cfg.checkpoint_sha256,
    'the demo checkpoint is not the one the golden was made on: regenerate it (tools/golden/qwen_image21_pipeline.py)');
  const noise = Float32Array.from((await c.input('latents')).data);
  const references: string[] = [];
  if (c.has('input', 'reference_png')) {
    const png = join(scratch, `${c.name}-ref.png`);
    writeFileSync(png, Uint8Array.from((await c.input('reference_png')).data));
    references.push(png);
  }
  let latents: Float32Array | undefined;
  let decoded: { data: Float32Array; H: number; W: number; C: number } | undefined;
  const pipeline = new QwenImage21Pipeline({
    engine: testEngine, checkpoint: async () => dir, int8: false, dtype: 'f32',
    noise: (_t, C, h, w) => (assert.equal(noise.length, h * w * C), noise),
    onSampled: (x) => (latents = x),
    onDecoded: (data, H, W, C) => (decoded = { data, H, W, C }),
  });
  const task: QwenImageTask = {
    prompt: cfg.prompt, negative: cfg.negative_prompt, cfg: cfg.true_cfg_scale, seed: c.seed, steps: cfg.num_inference_steps,
    width: cfg.width, height: cfg.height, references, referenceArea: (cfg.output_resolution ?? 1024) ** 2,
    outputPath: join(scratch, `${c.name}.png`), png: { prompt: cfg.prompt, profile: 'imgmain_bf16', seed: c.seed, steps: cfg.num_inference_steps },
  };
  try {
    await pipeline.run(task, recordingContext());
  } finally {
    await pipeline.unload();
  }
  c.expect('f32', latents!, await c.output('latents'), 'latents');
  // upstream's postprocess "pt": (x / 2 + 0.5) clamped to [0, 1], (1, C, H, W)
  const want = await c.output('image');
  const { data, H, W, C } = decoded!;
  assert.deepEqual(want.shape, [1, C, H, W]);
  const got = new Float32Array(C * H * W);
  for (let i = 0; i < H * W; i++) for (let ch = 0; ch < C; ch++) got[ch * H * W + i] = Math.min(1, Math.max(0, data[i * C + ch]! / 2 + 0.5));
  c.expect('f32', got, want, 'image');
});
