// MiniMax H3's picture preparation (image-prep.ts) and Pillow's LANCZOS (pil-resize.ts) against upstream (golden
// minimax_h3/image_prep, tools/golden/minimax_h3_image_prep.py: diffusers' MiniMaxH3ResizeStep and
// MiniMaxH3Ref2VASetupStep with Pillow 13): canvas sizes, stretched and cover-cropped keyframes, reference images at
// their short edge, and the bare resampler up and down; every pixel equal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pilResizeLanczos, type Rgb8Image } from '../../src/models/common/pil-resize';
import { keyframeProblem } from '../../src/catalog';
import { coverCrop, prepareFrameKeyframes, prepareKeyframes, prepareReferenceImage, referenceImageSize, resolveCanvasSize } from '../../src/models/minimax_h3/conditioning/image-prep';
import { goldenTests, type GoldenCase } from './golden';

async function image(c: GoldenCase, kind: 'input' | 'output', i: number): Promise<Rgb8Image> {
  const t = await c.tensor(kind, `image_${i}`);
  const [height, width, channels] = t.shape as [number, number, number];
  return { width, height, channels, data: Uint8Array.from(t.data) };
}

function expectPixels(got: Rgb8Image, want: Rgb8Image, label: string): void {
  assert.deepEqual([got.width, got.height], [want.width, want.height], `${label}: size`);
  for (let i = 0; i < want.data.length; i++) {
    if (got.data[i] !== want.data[i]) assert.fail(`${label}: byte ${i} (pixel ${Math.floor(i / 3)}): got ${got.data[i]}, want ${want.data[i]}`);
  }
}

goldenTests('minimax_h3', 'image_prep', async (c) => {
  const cfg = c.config as Record<string, number | string>;
  const n = c.names('input').length;
  const inputs = await Promise.all(Array.from({ length: n }, (_, i) => image(c, 'input', i)));
  const wants = await Promise.all(Array.from({ length: n }, (_, i) => image(c, 'output', i)));
  if (cfg.kind === 'keyframes') {
    const rule = { multiple: cfg.multiple as number, shortEdge: cfg.short_edge as number, maxPixels: cfg.max_pixels as number };
    const got = prepareKeyframes(inputs, undefined, rule);
    assert.deepEqual([got.height, got.width], [cfg.height, cfg.width], 'canvas');
    got.keyframes.forEach((k, i) => expectPixels(k, wants[i]!, `keyframe ${i}`));
  } else if (cfg.kind === 'references') {
    // the canvas of a reference request is 16:9 under the released rule (the step's config here)
    assert.deepEqual(resolveCanvasSize(16, 9), { height: cfg.canvas_height, width: cfg.canvas_width }, '16:9 canvas');
    inputs.forEach((img, i) => expectPixels(prepareReferenceImage(img, cfg.short_edge as number, cfg.multiple as number), wants[i]!, `reference ${i}`));
  } else {
    expectPixels(pilResizeLanczos(inputs[0]!, cfg.width as number, cfg.height as number), wants[0]!, 'resize');
  }
});

test('service keyframes: every image cover-cropped onto the job frame as the last-keyframe rule; a cover past 8192^2 pixels refused', () => {
  const img = (w: number, h: number): Rgb8Image => ({ width: w, height: h, channels: 3, data: Uint8Array.from({ length: w * h * 3 }, (_, i) => (i * 13) % 256) });
  const [a, b] = prepareFrameKeyframes([img(150, 100), img(40, 90)], 96, 64);
  assert.deepEqual([a!.width, a!.height, b!.width, b!.height], [96, 64, 96, 64]);
  // the first keyframe too is cover-cropped (not stretched as diffusers does onto its own canvas): the same pixels as
  // the last-keyframe rule, which the golden checks against diffusers
  assert.deepEqual(a, coverCrop(img(150, 100), 96, 64));
  assert.deepEqual(prepareKeyframes([img(96, 64), img(150, 100)], { height: 64, width: 96 }).keyframes[1], a);
  const same = img(96, 64);
  assert.deepEqual(prepareFrameKeyframes([same], 96, 64)[0], same, 'a picture of the frame size is copied as it is');
  // 8000 x 10 onto 608 x 352: scaled by 35.2 to 281600 x 352 = 99 MP
  assert.throws(() => coverCrop(img(8000, 10), 608, 352), /8000x10 would be scaled to 281600x352/);
  assert.match(keyframeProblem('images[0]', 608, 352, 8000, 10)!, /^images\[0\]: a 8000x10 picture would be scaled to 281600x352 to cover the 608x352 frame/);
  assert.equal(keyframeProblem('images[0]', 608, 352, 4000, 10), undefined, '49.6 MP is within the cap');
});

test('canvas rule at the released sizes: 16:9 -> 768 x 1344, portrait and square, the area cap, the aspect limits', () => {
  assert.deepEqual(resolveCanvasSize(16, 9), { height: 768, width: 1344 });
  assert.deepEqual(resolveCanvasSize(9, 16), { height: 1344, width: 768 });
  assert.deepEqual(resolveCanvasSize(1, 1), { height: 768, width: 768 });
  assert.deepEqual(resolveCanvasSize(4, 1), { height: 512, width: 2016 }); // capped: 768 x 3072 scaled by 0.661
  assert.throws(() => resolveCanvasSize(5, 1), /1:4/);
  assert.deepEqual(referenceImageSize(1000, 1000), { height: 2048, width: 2048 });
  assert.deepEqual(referenceImageSize(4000, 3000), { height: 2048, width: 2720 }); // 2730.67 / 32 = 85.3 -> 85
});
