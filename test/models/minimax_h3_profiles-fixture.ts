// Shared by the profile-side H3 tests (native checkpoint format, adapter, step cache, profiles): the golden transformer cases'
// tiny weights as host arrays, checkpoints re-written from them, and one forward of a case through a loaded model.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Engine } from '../../src/engine/engine';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { rowTimestepPlan } from '../../src/models/minimax_h3/sampler/sampler';
import type { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { oneSample, WEIGHT_PREFIX, type GoldenCase } from './golden';
import { caseSequence } from './minimax_h3-golden';
import { writeFile } from 'node:fs/promises';

export interface HostWeight {
  shape: number[];
  data: Float32Array;
}

/** The case's transformer weights by diffusers key (prefix removed), float32. */
export async function caseWeights(c: GoldenCase): Promise<Map<string, HostWeight>> {
  const out = new Map<string, HostWeight>();
  for (const k of c.ckpt.keys()) {
    if (!k.startsWith(WEIGHT_PREFIX)) continue;
    out.set(k.slice(WEIGHT_PREFIX.length), { shape: c.ckpt.entry(k).shape, data: await c.ckpt.readFloat32(k) });
  }
  return out;
}

export const tmpDir = (tag: string): string => mkdtempSync(join(tmpdir(), `kiln-h3-${tag}-`));

/** Writes a diffusers transformer/ folder (config.json + one file) from host weights. */
export async function writeDiffusers(dir: string, config: Record<string, unknown>, w: Map<string, HostWeight>): Promise<void> {
  const t: Record<string, WriteTensor> = {};
  for (const [k, v] of w) t[k] = { dtype: 'F32', shape: v.shape, data: v.data };
  await writeSafetensors(join(dir, 'diffusion_pytorch_model.safetensors'), t);
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
}

/** One forward of the case's inputs (refiner, adaln, every block, heads): host velocities. */
export async function runCase(e: Engine, model: MiniMaxH3Transformer, c: GoldenCase): Promise<{ video: Float32Array; audio: Float32Array }> {
  const { packed } = await caseSequence(c);
  const plan = rowTimestepPlan(packed, (await c.input('video_t')).data[0]!, (await c.input('audio_t')).data[0]!);
  const rows = async (name: string) => {
    const h = oneSample(await c.input(name), `input.${name}`);
    return e.upload(h.data, h.shape, 'f32');
  };
  const video = await rows('hidden_states');
  const audio = await rows('audio_hidden_states');
  const textIn = await c.input('encoder_hidden_states');
  const text32 = e.upload(textIn.data, textIn.shape, 'f32');
  const sequence = model.prepare(packed);
  try {
    const text = model.encodeText(text32);
    const adaln = model.adaln(plan.timesteps);
    const out = model.forward({ video, audio, text, sequence, adaln, timestepIndices: plan.indices });
    adaln.free();
    text.free();
    const res = { video: await e.read(out.video), audio: await e.read(out.audio) };
    out.video.free();
    out.audio.free();
    return res;
  } finally {
    for (const t of [video, audio, text32]) t.free();
    sequence.free();
  }
}
