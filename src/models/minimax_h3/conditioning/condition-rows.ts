// The visual conditioning rows of a keyframe or reference request (diffusers MiniMaxH3PrepareConditionLatentsStep,
// 58eb52c0): each condition's normalised latents [C, T, h, w] mixed with noise to MiniMax H3's conditioning level,
// x = 0.999 x0 + (1 - 0.999) noise (MiniMaxH3Scheduler.scale_noise in float32), patchified 1 x 2 x 2 into rows, the
// conditions' rows concatenated in packed order: the leading video rows of the sequence, never written by the sampler.
// Upstream draws one noise tensor per condition from the request's generator, before the target's noise
// (h3-conditioning.md 7.1); `TorchGenerator` reproduces those draws for a torch seed. The service's keyframe jobs
// draw it from Kiln's own streams instead (pipeline.ts keyframeNoises; docs/models/minimax-h3.md "Keyframes in the
// service").
import { TorchGenerator } from '../../common/torch-rng';
import { KEYFRAME_NOISE_AUG } from '../sequence/packed-sequence';

export interface HostLatents {
  data: Float32Array;
  /** [C, T, h, w] */
  shape: readonly [number, number, number, number];
}

/** The noised, patchified conditioning rows [sum of rows, C * pt * ph * pw]; `noises[i]` has conditions[i]'s size. */
export function conditionRows(conditions: readonly HostLatents[], noises: readonly Float32Array[], patch: readonly [number, number, number] = [1, 2, 2], level = KEYFRAME_NOISE_AUG): Float32Array {
  if (noises.length !== conditions.length) throw new RangeError(`conditionRows: ${noises.length} noise tensors for ${conditions.length} conditions`);
  const [pt, ph, pw] = patch;
  const t = Math.fround(level);
  const s = Math.fround(1 - t);
  const parts: Float32Array[] = [];
  conditions.forEach((c, i) => {
    const [C, T, h, w] = c.shape;
    const noise = noises[i]!;
    if (c.data.length !== C * T * h * w || noise.length !== c.data.length) throw new RangeError(`conditionRows: condition ${i} [${c.shape.join(', ')}] with ${c.data.length} values and ${noise.length} noise values`);
    if (T % pt || h % ph || w % pw) throw new RangeError(`conditionRows: condition ${i} [${c.shape.join(', ')}] is not divisible by the patch ${patch.join('x')}`);
    const width = C * pt * ph * pw;
    const out = new Float32Array(c.data.length);
    let row = 0;
    for (let f = 0; f < T / pt; f++) {
      for (let y = 0; y < h / ph; y++) {
        for (let x = 0; x < w / pw; x++, row++) {
          let j = 0;
          for (let ch = 0; ch < C; ch++) {
            for (let a = 0; a < pt; a++) {
              for (let b = 0; b < ph; b++) {
                for (let d = 0; d < pw; d++, j++) {
                  const src = ((ch * T + f * pt + a) * h + y * ph + b) * w + x * pw + d;
                  out[row * width + j] = Math.fround(Math.fround(t * c.data[src]!) + Math.fround(s * noise[src]!));
                }
              }
            }
          }
        }
      }
    }
    parts.push(out);
  });
  const all = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.length;
  }
  return all;
}

/** The request generator's draws for the conditions, in packed order (one torch.randn per condition). */
export function conditionNoises(generator: TorchGenerator, conditions: readonly HostLatents[]): Float32Array[] {
  return conditions.map((c) => generator.randn(c.data.length));
}
