// Krea 2 Turbo end to end against krea-ai/krea-2's sample() loop (krea2/pipeline, tools/golden/krea2_pipeline.py): the
// service pipeline on the demo checkpoint, which upstream's own classes loaded for the fixture (every file's sha256
// pinned: a changed demo generator means the golden must be regenerated), with upstream's noise draw given to both.
// The final latent and the decoded pixels are compared by the f32 rule against upstream's float32 run (allowance
// from its float64 run), and the png's bytes against upstream's 8-bit picture (sample()'s truncation; a byte may
// differ by one where the float32 value sits on a boundary).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { Krea2Pipeline, krea2DemoLayout } from '../../src/models/krea2';
import { testEngine, type HostTensor } from '../engine/helpers';
import { checkpointHashes } from './e2e-checkpoints';
import { goldenTests } from './golden';
import { writeKrea2Checkpoint } from './krea2-checkpoint';
import { recordingContext } from './run-context';

/** (1, C, H, W) -> (1, H, W, C). */
function channelsLast(x: HostTensor): HostTensor {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const plane = H * W;
  const out = new Float64Array(x.data.length);
  for (let n = 0; n < N; n++) for (let c = 0; c < C; c++) for (let i = 0; i < plane; i++) out[(n * plane + i) * C + c] = x.data[(n * C + c) * plane + i]!;
  return { data: out, shape: [N, H, W, C] };
}

goldenTests('krea2', 'pipeline', async (c) => {
  const e = await testEngine();
  const dir = mkdtempSync(join(tmpdir(), 'krea2-e2e-'));
  try {
    const root = join(dir, 'ckpt');
    await writeKrea2Checkpoint(e, root);
    const pinned = JSON.parse(c.ckpt.metadata.checkpoint_sha256 ?? '{}') as Record<string, string>;
    assert.deepEqual(checkpointHashes(root), pinned, 'the demo checkpoint is the one the fixture was made from (else regenerate it: tools/golden/krea2_pipeline.py)');
    const noise = Float32Array.from((await c.input('noise')).data);
    let latents: Float32Array | undefined;
    let decoded: Float32Array | undefined;
    const pipe = new Krea2Pipeline({
      engine: async () => e, layout: async () => krea2DemoLayout(root), int8: false, dtype: 'f32',
      noise: () => noise, onSampled: (l) => (latents = l), onDecoded: (d) => (decoded = d),
    });
    const int = async (n: string) => (await c.ints(n)).data[0]!;
    const [width, height, steps, seed] = [await int('width'), await int('height'), await int('steps'), await int('seed')];
    assert.equal((await c.input('mu')).data[0], Math.fround(1.15), 'the Turbo shift');
    const prompt = String.fromCodePoint(...(await c.ints('prompt_codepoints')).data);
    const out = join(dir, 'out.png');
    try {
      await pipe.run({ prompt, negative: '', cfg: 1, seed, steps, width, height, references: [], outputPath: out, png: { prompt, profile: 'imgart_turbo', seed, steps } }, recordingContext());
    } finally {
      await pipe.unload();
    }
    c.expect('f32', latents!, await c.output('latents'), 'latents', 'final latent (f32)');
    c.expect('f32', decoded!, channelsLast(await c.output('decoded')), 'decoded', 'decoded pixels (f32)');
    const { data, info } = await sharp(readFileSync(out)).raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([info.width, info.height, info.channels], [width, height, 3]);
    const want = (await c.output('image')).data;
    assert.equal(data.length, want.length, `the png has ${data.length} bytes, upstream's output.image ${want.length}`);
    let differ = 0;
    for (let i = 0; i < data.length; i++) {
      const d = Math.abs(data[i]! - want[i]!);
      assert.ok(d <= 1, `png byte ${i}: ${data[i]} vs upstream's ${want[i]}`);
      if (d) differ++;
    }
    assert.ok(differ <= data.length / 100, `${differ} of ${data.length} png bytes differ by one from upstream's picture`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
