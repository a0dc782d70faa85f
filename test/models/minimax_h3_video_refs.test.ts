// A MiniMax H3 video reference before encoding (video-refs.ts) against diffusers (golden minimax_h3/video_refs,
// tools/golden/minimax_h3_video_refs.py): frames onto 24 fps (held or dropped), truncated and put on their own canvas
// with Pillow's LANCZOS, every pixel equal; the 2 fps frames the text encoder reads and their blocks' timestamps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Rgb8Image } from '../../src/models/common/pil-resize';
import { prepareVideoReference, resampleFrameIndices, sampleVideoFrames, videoReferenceEncodeFrames } from '../../src/models/minimax_h3/conditioning/video-refs';
import { goldenTests, type GoldenCase } from './golden';

async function frames(c: GoldenCase, kind: 'input' | 'output'): Promise<Rgb8Image[]> {
  const t = await c.tensor(kind, 'frames');
  const [n, height, width] = t.shape as [number, number, number, number];
  const size = height * width * 3;
  return Array.from({ length: n }, (_, i) => ({ width, height, channels: 3, data: Uint8Array.from(t.data.subarray(i * size, (i + 1) * size)) }));
}

goldenTests('minimax_h3', 'video_refs', async (c) => {
  const cfg = c.config as Record<string, number | string>;
  if (cfg.kind === 'normalize') {
    const got = prepareVideoReference(await frames(c, 'input'), cfg.fps as number, cfg.num_frames as number, { multiple: 32, shortEdge: cfg.short_edge as number, maxPixels: cfg.max_pixels as number });
    const want = await frames(c, 'output');
    assert.equal(got.length, want.length, 'frame count');
    got.forEach((f, i) => {
      assert.deepEqual([f.width, f.height], [want[i]!.width, want[i]!.height], `frame ${i} size`);
      assert.ok(f.data.every((v, j) => v === want[i]!.data[j]), `frame ${i} pixels`);
    });
  } else {
    const s = sampleVideoFrames(cfg.count as number, cfg.fps as number, cfg.sample_fps as number, cfg.temporal_patch as number);
    assert.deepEqual(s.indices, Array.from((await c.output('indices')).data), 'sampled frames');
    assert.deepEqual(s.blockTimestamps, Array.from((await c.output('block_timestamps')).data), 'block timestamps');
  }
});

test('video reference frame rates: 30 -> 24 drops, 15 -> 24 holds, 24 keeps; too short a clip is refused', () => {
  assert.deepEqual(resampleFrameIndices(5, 30), [0, 1, 3, 4]); // numpy: slots floor(i 0.8 + 0.5) = 0, 1, 2, 2, 3; end 4
  assert.deepEqual(resampleFrameIndices(3, 15), [0, 0, 1, 2, 2]);
  assert.deepEqual(resampleFrameIndices(3, 24), [0, 1, 2]);
  assert.throws(() => sampleVideoFrames(12), /at least 13/);
});

test('video reference frames encoded: snapped down to 17k + 5, as the reference encoder step', () => {
  // upstream: frames[:max(1, (n - 5) // 17) * 17 + 5]
  assert.deepEqual([22, 38, 39, 40, 124, 130, 361].map(videoReferenceEncodeFrames), [22, 22, 39, 39, 124, 124, 345]);
  assert.equal(videoReferenceEncodeFrames(10), 10); // the slice bound (22) is past a short clip's end
});
