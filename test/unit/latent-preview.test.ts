// The live previews' latent-to-RGB projection (issue 46, models/common/latent-preview.ts): fitted by least squares
// against a decoder, it recovers a decoder that is linear per latent cell exactly (within the 8-bit rounding of its
// pictures); projectLatents lays frames side by side; the preview steps are about five, evenly spread, never the last.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fitLatentProjection, previewAnimatedWebp, previewSteps, previewWebp, projectLatents } from '../../src/models/common/latent-preview';
import sharp from 'sharp';

test('a decoder that paints each cell weights x latent + bias (4 px blocks) is recovered within 0.02 per weight', async () => {
  const C = 6;
  const weights = Float32Array.from({ length: 3 * C }, (_, i) => Math.round(20 * Math.sin(i + 1)));
  const bias = Float32Array.from([128, 100, 150]);
  const fitted = await fitLatentProjection({
    channels: C, grid: 12, samples: 3, seed: 1,
    decode: async (lat, g) => projectUp(projectLatents({ channels: C, weights, bias }, lat, g, g), 4),
  });
  for (let i = 0; i < weights.length; i++) assert.ok(Math.abs(fitted.weights[i]! - weights[i]!) < 0.02 * 20, `weight ${i}: ${fitted.weights[i]} vs ${weights[i]}`);
  for (let c = 0; c < 3; c++) assert.ok(Math.abs(fitted.bias[c]! - bias[c]!) < 1, `bias ${c}: ${fitted.bias[c]} vs ${bias[c]}`);
});

/** Each pixel of a picture as a k x k block. */
function projectUp(p: { rgb: Uint8Array; width: number; height: number }, k: number) {
  const width = p.width * k;
  const height = p.height * k;
  const rgb = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) for (let c = 0; c < 3; c++) rgb[(y * width + x) * 3 + c] = p.rgb[(Math.floor(y / k) * p.width + Math.floor(x / k)) * 3 + c]!;
  return { rgb, width, height };
}

test('projectLatents: frames side by side, clamped to 0-255; previewWebp keeps the aspect at a 256 px longer side', async () => {
  const p = { channels: 1, weights: Float32Array.from([100, -100, 0]), bias: Float32Array.from([0, 255, 7]) };
  // 2 frames of 1 x 3 cells, one channel: frame 0 = 0, 1, 2; frame 1 = 3, -1, 0
  const pic = projectLatents(p, Float32Array.from([0, 1, 2, 3, -1, 0]), 1, 3, 2);
  assert.deepEqual([pic.width, pic.height], [6, 1]);
  assert.deepEqual(Array.from(pic.rgb), [0, 255, 7, 100, 155, 7, 200, 55, 7, 255, 0, 7, 0, 255, 7, 0, 255, 7]);
  const { webp, width, height } = await previewWebp({ rgb: new Uint8Array(24 * 16 * 3).fill(90), width: 24, height: 16 });
  const meta = await sharp(webp).metadata();
  assert.deepEqual([meta.format, meta.width, meta.height, width, height], ['webp', 256, 171, 256, 171]);
});

test('previewSteps: about five evenly spread, never the last step', () => {
  assert.deepEqual([...previewSteps(10)], [2, 4, 6, 8]);
  assert.deepEqual([...previewSteps(8)], [2, 4, 6]);
  assert.deepEqual([...previewSteps(50)], [9, 18, 27, 36, 45]);
  assert.deepEqual([...previewSteps(2)], [1]);
  assert.deepEqual([...previewSteps(1)], []);
});

test('previewAnimatedWebp: a video\'s frames as one looping webp, a page per frame, each scaled as previewWebp', async () => {
  const frame = (v: number) => ({ rgb: new Uint8Array(38 * 22 * 3).fill(v), width: 38, height: 22 });
  const { webp, width, height } = await previewAnimatedWebp([frame(20), frame(130), frame(240)]);
  const meta = await sharp(webp, { animated: true }).metadata();
  assert.deepEqual([meta.format, meta.pages, meta.width, meta.pageHeight, meta.loop, width, height], ['webp', 3, 256, 148, 0, 256, 148]);
  // one frame: a still
  assert.equal((await sharp((await previewAnimatedWebp([frame(20)])).webp).metadata()).pages, undefined);
});
