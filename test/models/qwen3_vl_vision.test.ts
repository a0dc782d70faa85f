// Qwen3VlVisionModel and the image preprocessing against transformers' Qwen3VLVisionModel + Qwen2VLImageProcessor
// (tools/golden/qwen3_vl_vision.py): patch rows, merged tokens and deepstack features, f32 and f16; one image and
// two images of different shapes in one call. Also smart_resize's rounding and the refusal to resample.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { imagePatches, parseQwen3VlImageProcessorConfig, parseQwen3VlVisionConfig, qwen3VlVisionShapes, Qwen3VlVisionModel, QWEN3_VL_IMAGE_PROCESSOR, smartResize } from '../../src/models/qwen3_vl_vision';
import type { ComputeDType } from '../../src/models/common/weights';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenTests, WEIGHT_PREFIX } from './golden';
import { goldenImages, goldenProcessor } from './qwen3_vl_vision-golden';

// int8: the blocks' and mergers' linears quantised per output channel at load, f16 activations
for (const variant of ['f32', 'f16', 'int8'] as const) {
  const dtype: ComputeDType = variant === 'f32' ? 'f32' : 'f16';
  goldenTests(
    'qwen3_vl_vision',
    'tower',
    async (c) => {
      const e = await testEngine();
      const cfg = parseQwen3VlVisionConfig(c.config, `${c.path} config`);
      // the key list demo checkpoints are written from is exactly upstream's state dict
      const shapes = qwen3VlVisionShapes(cfg, WEIGHT_PREFIX + cfg.keyPrefix);
      assert.deepEqual([...shapes.keys()].sort(), c.names('weight').map((n) => WEIGHT_PREFIX + n).sort(), 'tower keys');
      for (const [k, shape] of shapes) assert.deepEqual(shape, c.shape('weight', k.slice(WEIGHT_PREFIX.length)), k);
      const proc = await goldenProcessor(c);
      const inputs = (await goldenImages(c)).map((im, i) => imagePatches(im, cfg, proc, `image ${i}`));
      const grids = await c.ints('grid_thw');
      assert.deepEqual(inputs.flatMap((x) => x.grid), grids.data, 'grid_thw');
      const pixels = await c.output('pixel_values');
      const rows = inputs.reduce((n, x) => n + x.patches.length, 0);
      assert.equal(rows, pixels.data.length);
      const flat = new Float32Array(rows);
      let at = 0;
      for (const x of inputs) {
        flat.set(x.patches, at);
        at += x.patches.length;
      }
      expectClose(flat, pixels, { atol: 1e-6, rtol: 0 }, 'pixel_values');

      const model = await Qwen3VlVisionModel.load(e, c.ckpt, cfg, { dtype, int8: variant === 'int8', prefix: WEIGHT_PREFIX + cfg.keyPrefix });
      try {
        const out = model.forward(inputs);
        try {
          assert.deepEqual(out.tokens, inputs.map((x) => (x.grid[1] * x.grid[2]) / 4));
          c.expect(variant, await e.read(out.embeds), await c.output('embeds'), 'embeds', `${variant} embeds`);
          assert.equal(out.deepstack.length, cfg.deepstackVisualIndexes.length);
          for (const [k, d] of out.deepstack.entries()) c.expect(variant, await e.read(d), await c.output(`deepstack_${k}`), `deepstack_${k}`, `${variant} deepstack ${k}`);
        } finally {
          out.embeds.free();
          for (const d of out.deepstack) d.free();
        }
      } finally {
        model.free();
      }
    },
    variant,
  );
}

test('smartResize: Python rounding (halves to even), the min/max pixel bounds', () => {
  assert.deepEqual(smartResize(1024, 1024, 32, 65536, 16777216), [1024, 1024]);
  assert.deepEqual(smartResize(48, 48, 32, 1, 1e9), [64, 64], 'round(1.5) = 2');
  assert.deepEqual(smartResize(80, 80, 32, 1, 1e9), [64, 64], 'round(2.5) = 2');
  assert.deepEqual(smartResize(100, 100, 32, 65536, 16777216), [256, 256], 'too small: scaled up to >= min pixels');
  assert.deepEqual(smartResize(8192, 4096, 32, 65536, 4096 * 4096), [5792, 2880], 'too large: scaled down');
});

test('imagePatches refuses an image the processor would resample, and reads merge-block order', () => {
  const cfg = parseQwen3VlVisionConfig({
    model_type: 'qwen3_vl',
    vision_config: { depth: 1, hidden_size: 8, intermediate_size: 8, num_heads: 2, out_hidden_size: 8, patch_size: 2, num_position_embeddings: 4 },
  });
  const proc = { ...QWEN3_VL_IMAGE_PROCESSOR, minPixels: 1 };
  assert.throws(() => imagePatches({ data: new Float32Array(3 * 6 * 8), shape: [3, 6, 8] }, cfg, proc), /resized to 8x8/);
  // 4 x 8 image, patch 2, merge 2: 2 x 4 patches, blocks of 2 x 2; value = x + 10 y on every channel
  const data = new Float32Array(3 * 4 * 8);
  for (let c = 0; c < 3; c++) for (let y = 0; y < 4; y++) for (let x = 0; x < 8; x++) data[c * 32 + y * 8 + x] = x + 10 * y;
  const { patches, grid } = imagePatches({ data, shape: [3, 4, 8] }, cfg, proc);
  assert.deepEqual(grid, [1, 2, 4]);
  const row = 3 * 2 * 2 * 2; // C * T * p * p
  const firstPixel = (i: number) => patches[i * row]!;
  // block (0,0): patches (0,0) (0,1) (1,0) (1,1), then block (0,1): (0,2) (0,3) (1,2) (1,3)
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].map(firstPixel), [0, 2, 20, 22, 4, 6, 24, 26]);
  // one patch row: [c][t][y][x], the frame repeated over t
  assert.deepEqual(Array.from(patches.subarray(0, 8)), [0, 1, 10, 11, 0, 1, 10, 11]);
});

test('configs: the released Qwen3-VL files parse (vision_config of Qwen3-VL-4B-Instruct, its preprocessor_config.json)', () => {
  // values of shared/upstream/krea-2/text_encoder_Qwen3-VL-4B-Instruct/{config,preprocessor_config}.json (4.57 format)
  const cfg = parseQwen3VlVisionConfig({
    model_type: 'qwen3_vl',
    image_token_id: 151655,
    video_token_id: 151656,
    vision_start_token_id: 151652,
    vision_end_token_id: 151653,
    text_config: { hidden_size: 2560, model_type: 'qwen3_vl_text' },
    vision_config: {
      deepstack_visual_indexes: [5, 11, 17], depth: 24, hidden_act: 'gelu_pytorch_tanh', hidden_size: 1024, in_channels: 3,
      initializer_range: 0.02, intermediate_size: 4096, model_type: 'qwen3_vl', num_heads: 16, num_position_embeddings: 2304,
      out_hidden_size: 2560, patch_size: 16, spatial_merge_size: 2, temporal_patch_size: 2,
    },
  });
  assert.deepEqual(
    [cfg.depth, cfg.hiddenSize, cfg.numHeads, cfg.outHiddenSize, cfg.patchSize, cfg.temporalPatchSize, cfg.spatialMergeSize, cfg.numPositionEmbeddings],
    [24, 1024, 16, 2560, 16, 2, 2, 2304],
  );
  assert.deepEqual(cfg.deepstackVisualIndexes, [5, 11, 17]);
  assert.equal(cfg.hiddenAct, 'gelu_tanh');
  assert.deepEqual([cfg.imageTokenId, cfg.visionStartTokenId, cfg.visionEndTokenId], [151655, 151652, 151653]);
  const proc = parseQwen3VlImageProcessorConfig({
    size: { longest_edge: 16777216, shortest_edge: 65536 }, patch_size: 16, temporal_patch_size: 2, merge_size: 2,
    image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5], processor_class: 'Qwen3VLProcessor', image_processor_type: 'Qwen2VLImageProcessorFast',
  });
  assert.deepEqual(proc, QWEN3_VL_IMAGE_PROCESSOR);
  assert.throws(() => parseQwen3VlVisionConfig({ model_type: 'qwen3_vl', vision_config: { depth: 2, hidden_size: 8, num_heads: 2, intermediate_size: 8, out_hidden_size: 8, num_position_embeddings: 4, deepstack_visual_indexes: [2] } }), /deepstack_visual_indexes/);
  assert.throws(() => parseQwen3VlVisionConfig({ model_type: 'qwen3_vl', vision_config: { depth: 1, hidden_size: 8, num_heads: 2, intermediate_size: 8, out_hidden_size: 8, num_position_embeddings: 5 } }), /not a square/);
});
