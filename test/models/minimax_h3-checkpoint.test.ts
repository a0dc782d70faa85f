// MiniMax H3 checkpoint loading: the module fields ask for exactly the keys of the real diffusers index (no
// mapping table), and a sharded bf16 checkpoint in the diffusers format (f32 in/out projections and time MLP,
// bf16 elsewhere, as released) loads to the same model as the equivalent f32 file, also as int8.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { bf16BitsToF32, f32ToBf16Bits } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint, type TensorEntry } from '../../src/engine/safetensors';
import { writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { parseH3Config, type H3Config } from '../../src/models/minimax_h3/transformer/config';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import { DIFFUSERS_INDEX, MiniMaxH3Transformer, openH3Checkpoint, type H3ForwardOutput } from '../../src/models/minimax_h3/transformer/transformer';
import { testEngine } from '../engine/helpers';
import { expectClose, goldenCaseFiles, goldenDir, GoldenCase, oneSample } from './golden';
import { caseSequence } from './minimax_h3-golden';

const configs = goldenDir('minimax_h3', 'configs');
const readJson = (f: string) => JSON.parse(readFileSync(join(configs, f), 'utf8')) as Record<string, unknown>;

test('the transformer asks for exactly the keys of the released diffusers index', async () => {
  const e = await testEngine();
  const real = parseH3Config(readJson('transformer.json'));
  // the released key set at tiny widths: only the layer counts decide which keys exist
  const cfg: H3Config = { ...real, hiddenSize: 8, numHeads: 1, headDim: 8, ropeFreqDim: 1, ffnDim: 8, textDim: 8, freqDim: 4, timeEmbedHiddenDim: 8, timeEmbedDim: 4, inChannels: 2, audioInChannels: 2 };
  const asked: string[] = [];
  const stub = {
    path: 'stub',
    entry(name: string, shape?: readonly number[]): TensorEntry {
      asked.push(name);
      return { name, dtype: 'F32', shape: [...shape!], file: 'stub', start: 0, byteLength: 4 * shape!.reduce((a, b) => a * b, 1) };
    },
    async readChunks() {},
  } as unknown as Checkpoint;
  const model = await MiniMaxH3Transformer.load(e, stub, cfg);
  model.free();
  const index = readJson('transformer-index.json') as { weight_map: Record<string, string> };
  const released = Object.keys(index.weight_map).sort();
  assert.equal(released.length, 638);
  assert.deepEqual([...asked].sort(), released);
});

test('refuses the native format with a reason', async () => {
  const e = await testEngine();
  await assert.rejects(MiniMaxH3Transformer.load(e, {} as Checkpoint, parseH3Config(readJson('fl2va-transformer.json'))), /native checkpoint format/);
});

// upstream _keep_in_fp32_modules (substring match): these are F32 in the released checkpoint
const FP32 = ['proj_in', 'audio_proj_in', 'time_embedder', 'proj_out', 'audio_proj_out'];

test('a sharded bf16 diffusers checkpoint loads like the f32 file of the same values (f32 and int8)', async () => {
  const e = await testEngine();
  const c = await GoldenCase.open(goldenCaseFiles('minimax_h3', 'transformer').find((f) => f.endsWith('t2va.safetensors'))!);
  const dir = await mkdtemp(join(tmpdir(), 'kiln-h3-'));
  try {
    const cfg = parseH3Config(c.config);
    const single: Record<string, WriteTensor> = {};
    const sharded: Record<string, WriteTensor> = {};
    for (const key of c.names('weight')) {
      const w = await c.weight(key);
      const keepF32 = FP32.some((m) => key.startsWith(`${m}.`));
      const values = keepF32 ? Float32Array.from(w.data) : Float32Array.from(w.data, (x) => bf16BitsToF32(f32ToBf16Bits(x)));
      single[key] = { dtype: 'F32', shape: w.shape, data: values };
      sharded[key] = { dtype: keepF32 ? 'F32' : 'BF16', shape: w.shape, data: values };
    }
    await writeSafetensors(join(dir, 'single.safetensors'), single);
    const shardDir = join(dir, 'transformer');
    const index = await writeShardedSafetensors(shardDir, sharded, 16 * 1024);
    await rename(index, join(shardDir, DIFFUSERS_INDEX));
    const shards = await openH3Checkpoint(shardDir);
    assert.ok(new Set(Object.values(JSON.parse(readFileSync(join(shardDir, DIFFUSERS_INDEX), 'utf8')).weight_map)).size > 2, 'several shards');
    assert.equal(shards.entry('transformer_blocks.0.attn.to_q.weight').dtype, 'BF16');
    assert.equal(shards.entry('proj_in.weight').dtype, 'F32');
    const one = await Checkpoint.open(join(dir, 'single.safetensors'));
    const ref = await run(e, c, await MiniMaxH3Transformer.load(e, one, cfg));
    const fromShards = await run(e, c, await MiniMaxH3Transformer.load(e, shards, cfg));
    assert.deepEqual(fromShards.video, ref.video, 'video velocity');
    assert.deepEqual(fromShards.audio, ref.audio, 'audio velocity');
    const int8 = await run(e, c, await MiniMaxH3Transformer.load(e, shards, cfg, { int8: true }));
    expectClose(int8.video, { data: Float64Array.from(ref.video), shape: [ref.video.length] }, c.tol('int8'), 'int8 video');
    await one.close();
    await shards.close();
  } finally {
    await c.close();
    await rm(dir, { recursive: true, force: true });
  }
});

/** The golden case's forward through `model` (then freed): the two heads' outputs as host arrays. */
async function run(e: Engine, c: GoldenCase, model: MiniMaxH3Transformer): Promise<{ video: Float32Array; audio: Float32Array }> {
  const { packed } = await caseSequence(c);
  const up = async (name: string, drop: boolean) => {
    const h = await c.input(name);
    const x = drop ? oneSample(h, `input.${name}`) : h;
    return e.upload(x.data, x.shape, 'f32');
  };
  const video = await up('hidden_states', true);
  const audio = await up('audio_hidden_states', true);
  const text32 = await up('encoder_hidden_states', false);
  const sequence = model.prepare(packed);
  const plan = rowTimestepPlan(packed, (await c.input('video_t')).data[0]!, (await c.input('audio_t')).data[0]!);
  let out: H3ForwardOutput | undefined;
  try {
    const text = model.encodeText(text32);
    const adaln = model.adaln(plan.timesteps);
    out = model.forward({ video, audio, text, sequence, adaln, timestepIndices: plan.indices });
    adaln.free();
    text.free();
    return { video: await e.read(out.video), audio: await e.read(out.audio) };
  } finally {
    out?.video.free();
    out?.audio.free();
    for (const t of [video, audio, text32]) t.free();
    sequence.free();
    model.free();
  }
}
