// Shared by the MiniMax H3 trajectory goldens (minimax_h3-sampler: t2va / fl2va, minimax_h3_trajectory_guides,
// minimax_h3_trajectory_ref2va): run sampleH3 from the case's prepared rows and compare every step with upstream's
// loop, then check that the conditioning rows were never written.
import assert from 'node:assert/strict';
import type { Engine } from '../../src/engine/engine';
import { copy } from '../../src/engine/ops/layout';
import type { Tensor } from '../../src/engine/tensor';
import { sampleH3 } from '../../src/models/minimax_h3/sampler/sampler';
import type { PackedSequence } from '../../src/models/minimax_h3/sequence/packed-sequence';
import type { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import type { HostTensor } from '../engine/helpers';
import type { GoldenCase } from './golden';
import type { Variant } from './minimax_h3-golden';

/** Leading rows of a stream the sampler must leave as given: `count` rows of the fixture's `rows`. */
export interface KeptRows {
  stream: Tensor;
  rows: HostTensor;
  count: number;
  /** Names a value in the assertion message: `${label} ${j}`. */
  label: string;
}

export interface Trajectory {
  e: Engine;
  c: GoldenCase;
  v: Variant;
  model: MiniMaxH3Transformer;
  packed: PackedSequence;
  /** Video and audio rows in packed order (conditioning rows first), sampled in place. */
  video: Tensor;
  audio: Tensor;
  steps: number;
  kept: KeptRows[];
  /**
   * 'step' (default): the noise_pred captures' row-timestep plans are counted (steps - 1) and checked with each step's
   * latents. 'capture': every capture's plan is checked as it comes, and onStep must have reached steps - 1.
   */
  planCheck?: 'step' | 'capture';
}

/**
 * Encodes the case's text, runs sampleH3 and compares each step's timesteps, indices, velocities and latents with
 * the case (c.expect: the variant's rule), then the kept rows. Frees video, audio, the text and the model.
 */
export async function expectTrajectory(r: Trajectory): Promise<void> {
  const { e, c, v, model, video, audio, steps } = r;
  const textIn = await c.input('encoder_hidden_states');
  const text32 = e.upload(textIn.data, textIn.shape, 'f32');
  const text = model.encodeText(text32);
  const sequence = model.prepare(r.packed);
  const seen = new Map<string, Tensor>();
  const plans: { timesteps: number[]; indices: number[] }[] = [];
  const pending: Promise<void>[] = [];
  const perCapture = r.planCheck === 'capture';
  try {
    let done = 0;
    await sampleH3(e, model, sequence, text, video, audio, {
      steps,
      onStep: (k) => {
        done = k;
        seen.set(`step.${k - 1}.latents`, copy(e, video));
        seen.set(`step.${k - 1}.audio_latents`, copy(e, audio));
      },
      capture: (i, name, t, plan) => {
        seen.set(`step.${i}.${name}`, copy(e, t));
        if (perCapture) {
          pending.push(
            (async () => {
              assert.deepEqual(Array.from(plan.timesteps), Array.from((await c.output(`step.${i}.timestep`)).data), `step ${i} timesteps`);
              assert.deepEqual(Array.from(plan.indices), Array.from((await c.output(`step.${i}.timestep_indices`)).data), `step ${i} indices`);
            })(),
          );
        } else if (name === 'noise_pred') plans.push({ timesteps: Array.from(plan.timesteps), indices: Array.from(plan.indices) });
      },
    });
    if (perCapture) {
      await Promise.all(pending);
      assert.equal(done, steps - 1);
    } else assert.equal(plans.length, steps - 1);
    for (let i = 0; i < steps - 1; i++) {
      if (!perCapture) {
        assert.deepEqual(plans[i]!.timesteps, Array.from((await c.output(`step.${i}.timestep`)).data), `step ${i} timesteps`);
        assert.deepEqual(plans[i]!.indices, Array.from((await c.output(`step.${i}.timestep_indices`)).data), `step ${i} indices`);
      }
      for (const name of ['noise_pred', 'audio_noise_pred', 'latents', 'audio_latents']) {
        const key = `step.${i}.${name}`;
        c.expect(v.int8 ? 'int8' : v.dtype, await e.read(seen.get(key)!), await c.output(key), key, `${key} (${v.name})`);
      }
    }
    // the conditioning rows were never written
    for (const k of r.kept) {
      const got = await e.read(k.stream);
      for (let j = 0; j < k.count * k.rows.shape[1]!; j++) assert.equal(got[j], Math.fround(k.rows.data[j]!), `${k.label} ${j}`);
    }
  } finally {
    seen.forEach((t) => t.free());
    for (const t of [video, audio, text32, text]) t.free();
    sequence.free();
    model.free();
  }
}
