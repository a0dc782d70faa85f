// MiniMax H3's text encoder with pictures (text-encoder/vision.ts) against upstream's get_qwen3vl_prompt_embeds with
// vision inputs (golden minimax_h3/text_encoder_vision, tools/golden/minimax_h3_text_vision.py): FL2VA keyframes and
// Ref2VA image references in a presentation, the tower's merged tokens over the pad rows, deepstack, 3-D MRoPE,
// hidden_states[layer], in f32 and f16 by the golden rules.
import assert from 'node:assert/strict';
import type { VisionInput } from '../../src/models/qwen3_vl_vision';
import { H3VisionTextEncoder } from '../../src/models/minimax_h3/text-encoder/vision';
import { testEngine } from '../engine/helpers';
import { goldenTests, WEIGHT_PREFIX } from './golden';

for (const dtype of ['f32', 'f16'] as const) {
  goldenTests('minimax_h3', 'text_encoder_vision', async (c) => {
    const e = await testEngine();
    const layer = c.config.text_encoder_layer as number;
    const enc = await H3VisionTextEncoder.load(e, c.ckpt, c.config, {
      dtype, layer, prefix: `${WEIGHT_PREFIX}model.language_model.`, visionPrefix: `${WEIGHT_PREFIX}model.visual.`,
    });
    try {
      const ids = (await c.ints('ids')).data;
      const images: VisionInput[] = [];
      for (let i = 0; c.has('input', `pixel_values_${i}`); i++) {
        const grid = (await c.ints(`grid_${i}`)).data as [number, number, number];
        images.push({ patches: Float32Array.from((await c.input(`pixel_values_${i}`)).data), grid });
      }
      assert.ok(images.length > 0, 'the case has pictures');
      const out = enc.encode(ids, images);
      try {
        const want = await c.output('prompt_embeds');
        assert.deepEqual(out.shape, want.shape);
        c.expect(dtype, await e.read(out), want, 'prompt_embeds');
      } finally {
        out.free();
      }
      assert.throws(() => enc.encode(ids.slice(0, -1).concat([ids.at(-1)!]).filter((_, i) => i !== ids.indexOf(c.config.image_token_id as number)), images), /image_pad/);
    } finally {
      enc.free();
    }
  }, dtype);
}
