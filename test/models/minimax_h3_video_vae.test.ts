// MiniMax H3 video VAE decoder against diffusers golden vectors (minimax_h3/video_vae, tools/golden/
// minimax_h3_video_vae.py) in f32 and f16: intermediates of the first tile (post_quant_conv, patch embed, block 0,
// the rows before un-patchify), the decoded frames (temporal chunks cross-faded, tails padded and cut, spatial
// tiles blended with tiling forced at tiny tile sizes) and the pipeline's RGB post-processing. Also the
// geometry (chunk plan, tile split) against upstream's numbers and the real config.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { copy } from '../../src/engine/ops/layout';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import { decodePlan, parseVideoVaeConfig, splitTiles, temporalGeometry, VideoVaeConfigError } from '../../src/models/minimax_h3/vae/video/config';
import { openVideoVaeCheckpoint, VIDEO_VAE_INDEX, VideoVaeDecoder, type VideoVaeDecodeOptions } from '../../src/models/minimax_h3/vae/video/decoder';
import { testEngine, type HostTensor } from '../engine/helpers';
import { goldenCaseFiles, goldenDir, goldenTests, GoldenCase, oneSample, WEIGHT_PREFIX } from './golden';

/** [1, C, T, h, w] (upstream) -> [T*h*w, C] tokens, the decoder's own layout. */
function toTokens(x: HostTensor): HostTensor {
  const [, C, T, h, w] = x.shape as [number, number, number, number, number];
  const n = T * h * w;
  const out = new Float64Array(n * C);
  for (let ch = 0; ch < C; ch++) for (let i = 0; i < n; i++) out[i * C + ch] = x.data[ch * n + i]!;
  return { data: out, shape: [n, C] };
}

/** [1, 3, F, H, W] -> [F, H, W, 3]. */
function channelsLast(x: HostTensor): HostTensor {
  const [, C, F, H, W] = x.shape as [number, number, number, number, number];
  const plane = F * H * W;
  const out = new Float64Array(plane * C);
  for (let ch = 0; ch < C; ch++) for (let i = 0; i < plane; i++) out[i * C + ch] = x.data[ch * plane + i]!;
  return { data: out, shape: [F, H, W, C] };
}

async function tilingOf(c: GoldenCase): Promise<VideoVaeDecodeOptions['tiling']> {
  const [on, th, tw, oh, ow] = Array.from((await c.input('tiling')).data);
  return on ? { tileHeight: th!, tileWidth: tw!, minOverlapHeight: oh!, minOverlapWidth: ow! } : false;
}

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests(
    'minimax_h3',
    'video_vae',
    async (c) => {
      const e: Engine = await testEngine();
      const vae = await VideoVaeDecoder.load(e, c.ckpt, c.config, { dtype, prefix: WEIGHT_PREFIX });
      const seen = new Map<string, Tensor>();
      try {
        const z = oneSample(await c.input('latents'), 'input.latents');
        const latents = { data: Float32Array.from(z.data), shape: z.shape as [number, number, number, number] };
        const tiling = await tilingOf(c);
        const raw = await vae.decode(latents, { tiling, output: 'raw', capture: (name, t) => seen.set(name, copy(e, t)) });
        const want = await c.output('decoded');
        assert.deepEqual([raw.frames, raw.height, raw.width], want.shape.slice(2), 'decoded frames x height x width');
        for (const name of ['post_quant_conv', 'patch_embed', 'block0', 'unpatchify_in'] as const) {
          const t = seen.get(name);
          assert.ok(t, `nothing captured as ${name}`);
          const w = await c.output(name);
          c.expect(dtype, await e.read(t), name === 'post_quant_conv' ? toTokens(w) : w, name, `${name} (${dtype})`);
        }
        c.expect(dtype, raw.data, channelsLast(want), 'decoded', `decoded (${dtype})`);
        if (c.has('output', 'video')) {
          const rgb = await vae.decode(latents, { tiling });
          c.expect(dtype, rgb.data, channelsLast(await c.output('video')), 'video', `video (${dtype})`);
          // the frame iterator hands out the same frames, one at a time
          const size = rgb.height * rgb.width * 3;
          let k = 0;
          for await (const f of vae.frames(latents, { tiling })) {
            assert.equal(f.length, size);
            assert.deepEqual(f, rgb.data.subarray(k * size, (k + 1) * size), `frame ${k}`);
            k++;
          }
          assert.equal(k, rgb.frames);
        }
      } finally {
        seen.forEach((t) => t.free());
        vae.free();
      }
    },
    dtype,
  );
}

const realConfig = () => JSON.parse(readFileSync(join(goldenDir('minimax_h3', 'video_vae'), 'real-config.json'), 'utf8')) as Record<string, unknown>;

test('video VAE: the released config (16x16x4 patches, 36 layers of 2048, 48 rotated dims, 5-token chunks)', () => {
  const c = parseVideoVaeConfig(realConfig());
  assert.deepEqual([c.patch, c.patchT, c.numLayers, c.numHeads * c.headDim, c.ropeDim, c.numRegisterTokens, c.latentChannels], [16, 4, 36, 2048, 48, 4, 24]);
  assert.deepEqual(temporalGeometry(c), { tokensChunk: 5, framePrePadding: 3, tokenOverlap: 2, frameOverlap: 5 });
  // 5k + 2 latent frames decode to 17k + 5 pixel frames in k clips of 7 latent frames
  for (const k of [1, 2, 7, 14]) {
    const p = decodePlan(c, 5 * k + 2);
    assert.equal(p.frames, 17 * k + 5);
    assert.equal(p.clips.length, k);
    assert.ok(p.clips.every((cl, i) => cl.start === 5 * i && cl.length === 7));
  }
  assert.throws(() => parseVideoVaeConfig({ ...realConfig(), latents_std: [1] }), VideoVaeConfigError);
  assert.throws(() => parseVideoVaeConfig({ ...realConfig(), decoder_rope_dim_ratio: 0.7 }), VideoVaeConfigError);
});

test('video VAE: tile split as upstream (_split_tiles, ratio 16)', () => {
  // 768 x 1344 at the released 256 / 64: 4 x 7 tiles, slack spread round-robin in steps of 16
  assert.deepEqual(splitTiles(768, 256, 64, 16), { starts: [0, 160, 336, 512], sizes: [256, 256, 256, 256], overlaps: [96, 80, 80] });
  const w = splitTiles(1344, 256, 64, 16);
  assert.equal(w.starts.length, 7);
  assert.equal(w.starts.at(-1)! + 256, 1344);
  assert.ok(w.overlaps.every((o) => o >= 64 && o % 16 === 0));
  assert.deepEqual(splitTiles(240, 256, 64, 16), { starts: [0], sizes: [240], overlaps: [] });
});

test('video VAE: loads the released format (fp16 shards behind diffusion_pytorch_model.safetensors.index.json)', async () => {
  const file = goldenCaseFiles('minimax_h3', 'video_vae').find((f) => f.endsWith('one_clip.safetensors'));
  assert.ok(file, 'one_clip case');
  const c = await GoldenCase.open(file);
  const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-vae-'));
  const e = await testEngine();
  try {
    // the fixture's weights under their checkpoint keys, stored F16 as released, spread over several shards
    const tensors: Record<string, WriteTensor> = {};
    for (const k of c.names('weight')) tensors[k] = { dtype: 'F16', shape: c.shape('weight', k), data: (await c.weight(k)).data };
    const index = await writeShardedSafetensors(dir, tensors, 64 * 1024);
    renameSync(index, join(dirname(index), VIDEO_VAE_INDEX));
    const ckpt = await openVideoVaeCheckpoint(dir);
    const vae = await VideoVaeDecoder.load(e, ckpt, c.config, { dtype: 'f16' });
    try {
      const z = oneSample(await c.input('latents'), 'input.latents');
      const got = await vae.decode({ data: Float32Array.from(z.data), shape: z.shape as [number, number, number, number] }, { tiling: false, output: 'raw' });
      c.expect('f16', got.data, channelsLast(await c.output('decoded')), 'decoded', 'decoded from fp16 shards');
      // latents still on the GPU ([1, C, T, h, w], as the sampler leaves them) decode the same
      const zt = e.upload(Float32Array.from(z.data), z.shape, 'f32');
      try {
        const fromTensor = await vae.decode(zt, { tiling: false, output: 'raw' });
        assert.deepEqual(fromTensor.data, got.data);
      } finally {
        zt.free();
      }
    } finally {
      vae.free();
      await ckpt.close();
    }
  } finally {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
