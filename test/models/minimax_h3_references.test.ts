// MiniMax H3 reference mode layout (references.ts) against diffusers' build_ref2va_packed_sequence and
// build_row_timesteps (golden minimax_h3/references, tools/golden/minimax_h3_references.py): images on their own grids,
// voices pinned to the target grid, videos with and without a soundtrack, request order on the shared clock; positions
// bit for bit, tags, row indices, the reference row counts and every row's timestep through the sampler's plan.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildReferenceSequence, pythonFloatSum, type ReferenceBlock } from '../../src/models/minimax_h3/sequence/references';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import { checkPackedSequence, resolveGeometry } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { goldenTests } from './golden';
import { float64FromWords } from './minimax_h3-golden';

goldenTests('minimax_h3', 'references', async (c) => {
  const one = async (n: string) => (await c.ints(n)).data[0]!;
  const g = resolveGeometry(await one('num_frames'), await one('height'), await one('width'));
  assert.deepEqual([g.numLatentFrames, g.latentHeight, g.latentWidth, g.numAudioLatents],
    ['latent_frames', 'latent_height', 'latent_width', 'audio_latents'].map((k) => c.config[k]), 'geometry');
  const table = await c.ints('references');
  const references: ReferenceBlock[] = [];
  for (let i = 0; i < table.shape[0]!; i++) {
    const [kind, frames, h, w, audio] = table.data.slice(5 * i, 5 * i + 5) as [number, number, number, number, number];
    if (kind === 0) references.push({ kind: 'image', latentHeight: h, latentWidth: w });
    else if (kind === 1) references.push({ kind: 'audio', audioLatents: audio });
    else references.push({ kind: 'video', latentFrames: frames, latentHeight: h, latentWidth: w, audioLatents: audio });
  }
  const packed = buildReferenceSequence({ ...g, textTags: (await c.ints('text_token_tags')).data, references });
  checkPackedSequence(packed);
  const want = float64FromWords((await c.output('position_bits')).data);
  assert.equal(packed.positions.length, want.length, 'position count');
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(packed.positions[i], want[i])) assert.fail(`row ${Math.floor(i / 3)} axis ${i % 3}: got ${packed.positions[i]} want ${want[i]}`);
  }
  const ints = async (name: string) => Array.from((await c.output(name)).data);
  assert.deepEqual(Array.from(packed.tags), await ints('token_tags'), 'token_tags');
  assert.deepEqual(Array.from(packed.videoIndices), await ints('video_indices'), 'video_indices');
  assert.deepEqual(Array.from(packed.audioIndices), await ints('audio_indices'), 'audio_indices');
  assert.deepEqual(Array.from(packed.textIndices), await ints('text_indices'), 'text_indices');
  assert.equal(packed.numConditionVideoRows, (await c.output('num_condition_video_rows')).data[0]);
  assert.equal(packed.numConditionAudioRows, (await c.output('num_condition_audio_rows')).data[0]);
  const [tv, ta] = Array.from((await c.input('timesteps')).data);
  const plan = rowTimestepPlan(packed, tv!, ta!);
  const wantT = (await c.output('row_timestep')).data;
  for (let i = 0; i < packed.length; i++) assert.equal(plan.timesteps[plan.indices[i]!], wantT[i], `row ${i} timestep`);
});

test('references: bad geometry and kinds are refused', () => {
  const g = resolveGeometry(39, 64, 64);
  assert.throws(() => buildReferenceSequence({ ...g, textTags: [1], references: [{ kind: 'image', latentHeight: 5, latentWidth: 4 }] }), /not divisible/);
  assert.throws(() => buildReferenceSequence({ ...g, textTags: [1], references: [{ kind: 'audio', audioLatents: 0 }] }), /0 latent frames/);
  assert.throws(() => buildReferenceSequence({ ...g, textTags: [1], references: [{ kind: 'gif' } as unknown as ReferenceBlock] }), /not image, audio or video/);
});

test("pythonFloatSum is CPython 3.12+'s compensated sum(), not a running sum", () => {
  const tenths = new Array<number>(10).fill(0.1);
  let seq = 0;
  for (const v of tenths) seq += v;
  assert.equal(seq, 0.9999999999999999);
  assert.equal(pythonFloatSum(tenths), 1); // Python 3.12+: sum([0.1] * 10) == 1.0
  assert.equal(pythonFloatSum([]), 0);
  assert.equal(pythonFloatSum([1e308, 1e308]), Infinity);
});
