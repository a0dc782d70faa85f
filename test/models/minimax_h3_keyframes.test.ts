// MiniMax H3 keyframes (keyframes.ts) against upstream (golden minimax_h3/keyframes, tools/golden/minimax_h3_keyframes.py):
// guides pinned at any frame as ComfyUI's PackedLayout lays them out (positions bit for bit, tags, row indices, the
// conditioning row counts and every row's timestep in a forward), for 1, 2, 4 and 6 keyframes and an audio guide; for
// the 1- and 2-keyframe cases also the official FL2VA layout (diffusers' build_packed_sequence), which is what the
// service's keyframe sequence uses there; for the two audio-guide cases also the service's track sequence
// (buildTrackSequence: a track alone, and keyframes + a track).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildGuideSequence, buildKeyframeSequence, buildTrackSequence, keyframeFrameIndices, pixelFrames } from '../../src/models/minimax_h3/sequence/keyframes';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import { buildPackedSequence, checkPackedSequence, resolveGeometry, type KeyframeAnchor, type PackedSequence } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { goldenTests, type GoldenCase } from './golden';
import { float64FromWords } from './minimax_h3-golden';

async function expectPositions(c: GoldenCase, got: PackedSequence, name: string): Promise<void> {
  const want = float64FromWords((await c.output(name)).data);
  assert.equal(got.positions.length, want.length, `${name}: position count`);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got.positions[i], want[i])) assert.fail(`${name}: row ${Math.floor(i / 3)} axis ${i % 3}: got ${got.positions[i]} want ${want[i]}`);
  }
}

goldenTests('minimax_h3', 'keyframes', async (c) => {
  const one = async (n: string) => (await c.ints(n)).data[0]!;
  const g = resolveGeometry(await one('num_frames'), await one('height'), await one('width'));
  assert.deepEqual([g.numFrames, g.numLatentFrames, g.latentHeight, g.latentWidth, g.numAudioLatents],
    ['num_frames', 'latent_frames', 'latent_height', 'latent_width', 'audio_latents'].map((k) => c.config[k]), 'geometry');
  assert.equal(pixelFrames(g.numLatentFrames), g.numFrames);
  const textTags = (await c.ints('text_token_tags')).data;
  const frames = (await c.ints('guide_frames')).data;
  const video = (await c.ints('guide_video')).data;
  const audio = (await c.ints('guide_audio_latents')).data;
  const request = { ...g, textTags };
  const packed = buildGuideSequence({ ...request, guides: frames.map((frameIndex, k) => ({ frameIndex, videoLatentFrames: video[k]!, audioLatents: audio[k]! })) });
  checkPackedSequence(packed);
  await expectPositions(c, packed, 'position_bits');
  const ints = async (name: string) => Array.from((await c.output(name)).data);
  assert.deepEqual(Array.from(packed.tags), await ints('token_tags'), 'token_tags');
  assert.deepEqual(Array.from(packed.videoIndices), await ints('video_indices'), 'video_indices');
  assert.deepEqual(Array.from(packed.audioIndices), await ints('audio_indices'), 'audio_indices');
  assert.equal(packed.numConditionVideoRows, (await c.output('num_condition_video_rows')).data[0]);
  assert.equal(packed.numConditionAudioRows, (await c.output('num_condition_audio_rows')).data[0]);

  // every row's timestep in one forward: the sampler's plan over this sequence
  const [tv, ta] = Array.from((await c.input('timesteps')).data);
  const plan = rowTimestepPlan(packed, tv!, ta!);
  const wantT = (await c.output('row_timestep')).data;
  for (let i = 0; i < packed.length; i++) {
    assert.equal(plan.timesteps[plan.indices[i]!], Math.fround(wantT[i]!), `row ${i} timestep`);
  }

  const imagesOnly = video.every((v) => v === 1) && audio.every((a) => a === 0);
  if (imagesOnly && frames.every((f, k) => f === keyframeFrameIndices(frames.length, g.numFrames)[k])) {
    // the service's sequence for this many images: diffusers' layout for 1-2, these guides from 3 on
    const service = buildKeyframeSequence(request, frames.length);
    if (frames.length > 2) await expectPositions(c, service, 'position_bits');
    else await expectPositions(c, service, 'diffusers_position_bits');
  }
  const track = audio[0]! > 0 && audio.slice(1).every((a) => a === 0);
  if (track && video.every((v, k) => v === (k === 0 && frames.length === 1 ? 0 : 1)) && frames.every((f, k) => video[0] === 0 || f === keyframeFrameIndices(frames.length, g.numFrames)[k])) {
    // the service's track sequence (audio_mode track): the clip on the first guide at frame 0, keyframes as images
    const service = buildTrackSequence(request, video[0] === 0 ? 0 : frames.length, audio[0]!);
    await expectPositions(c, service, 'position_bits');
    assert.deepEqual(Array.from(service.audioIndices), await ints('audio_indices'), 'track: audio_indices');
    assert.equal(service.numConditionAudioRows, (await c.output('num_condition_audio_rows')).data[0]);
  }
  if (c.has('output', 'diffusers_position_bits')) {
    const anchors = frames.map((f): KeyframeAnchor => (f === 0 ? 'first' : 'last'));
    await expectPositions(c, buildPackedSequence({ ...request, keyframeAnchors: anchors }), 'diffusers_position_bits');
  }
});

test('keyframe frames: first; first and last; then evenly in between (Python rounding)', () => {
  assert.deepEqual(keyframeFrameIndices(1, 124), [0]);
  assert.deepEqual(keyframeFrameIndices(2, 124), [0, 123]);
  assert.deepEqual(keyframeFrameIndices(3, 124), [0, 62, 123]); // 61.5 rounds to even
  assert.deepEqual(keyframeFrameIndices(4, 39), [0, 13, 25, 38]);
  assert.deepEqual(keyframeFrameIndices(6, 73), [0, 14, 29, 43, 58, 72]);
  assert.throws(() => keyframeFrameIndices(7, 124), /1 to 6/);
  assert.throws(() => keyframeFrameIndices(0, 124), /1 to 6/);
});

test('guides: a frame outside the video and an empty guide are refused', () => {
  const g = resolveGeometry(39, 64, 64);
  assert.throws(() => buildGuideSequence({ ...g, textTags: [1], guides: [{ frameIndex: 39 }] }), /outside/);
  assert.throws(() => buildGuideSequence({ ...g, textTags: [1], guides: [{ frameIndex: 0, videoLatentFrames: 0 }] }), /0 video latent frames/);
});

test('track sequence: every count of keyframes, the clip on the first guide at frame 0; a clip past the target refused', () => {
  const g = resolveGeometry(39, 64, 96);
  for (const n of [0, 1, 2, 3]) {
    const s = buildTrackSequence({ ...g, textTags: [1, 1] }, n, g.numAudioLatents);
    checkPackedSequence(s);
    assert.equal(s.numConditionAudioRows, 2 * g.numAudioLatents, `${n} keyframes: the track's rows`);
    assert.equal(s.numConditionVideoRows, n * (64 / 32) * (96 / 32), `${n} keyframes: one latent frame each`);
    // the track's first row sits at the target's time origin (t = text rows), as the target audio's
    assert.equal(s.positions[s.audioIndices[0]! * 3], 2);
  }
  assert.throws(() => buildTrackSequence({ ...g, textTags: [1] }, 0, g.numAudioLatents + 1), /audio latents for a target of 65/);
});
