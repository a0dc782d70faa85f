// Step caching for basevid50_sol: the sampler reuses the last computed velocity instead of running the transformer
// at steps where the velocity has been changing slowly (TeaCache-style output reuse, decided from the velocities
// themselves). docs/models/minimax-h3.md "Profiles" has the choice, the measurements and how to repeat them.
//
// Why not inside attention: H3's attention is fully bidirectional over [text | audio | video] and every row,
// text included, is modulated by the step's AdaLN before Q/K/V, so no row's K/V is the same at two steps; caching
// text K/V would change the model. Reuse therefore happens only at the level of whole forwards.
//
// Rule at step i (0-based, n steps): compute if i < warmup or i >= n - tail, or if the last `maxConsecutive` steps
// were all reused; otherwise reuse when the relative L1 change between the last two *computed* velocities,
// divided by the number of steps between them, is below `threshold`. Deterministic: the same inputs give the
// same reuse pattern, so seeds still reproduce clips.
import type { Engine } from '../../../engine/engine';
import { copy } from '../../../engine/ops/layout';
import type { Tensor } from '../../../engine/tensor';

/** When the sampler may skip a forward and reuse the last computed velocity. */
export interface StepCachePolicy {
  /** Leading steps always computed (the clip's composition forms there). */
  warmup: number;
  /** Trailing steps always computed (fine detail). */
  tail: number;
  /** Reuse only while the per-step relative L1 change of the velocity is below this. */
  threshold: number;
  /** At most this many reuses in a row. */
  maxConsecutive: number;
}

/** basevid50_sol's policy (chosen and measured in docs/models/minimax-h3.md "Profiles"). */
export const SOL_STEP_CACHE: StepCachePolicy = { warmup: 6, tail: 4, threshold: 0.03, maxConsecutive: 1 };

export interface Velocities {
  video: Tensor;
  audio: Tensor;
}

/** The sampler's cache for one job: the last computed velocities (GPU copies) and their host copies for the rule. */
export class StepCache {
  private last: { step: number; gpu: Velocities; host: Float32Array } | null = null;
  /** Relative L1 change per step between the last two computed velocities. */
  private change = Infinity;
  private run = 0;
  /** Steps served from the cache, in order. */
  readonly reused: number[] = [];
  /** The per-step relative change measured at each computed step after the first (diagnostics, tuning). */
  readonly changes: number[] = [];

  constructor(
    readonly policy: StepCachePolicy,
    readonly steps: number,
  ) {
    const { warmup, tail, threshold, maxConsecutive } = policy;
    if (!(warmup >= 1 && tail >= 0 && threshold >= 0 && maxConsecutive >= 0)) throw new RangeError(`StepCache: bad policy ${JSON.stringify(policy)}`);
  }

  /** Whether step i takes the cached velocities (call once per step, in order). */
  reuse(i: number): boolean {
    const p = this.policy;
    const ok = !!this.last && i >= p.warmup && i < this.steps - p.tail && this.run < p.maxConsecutive && this.change < p.threshold;
    this.run = ok ? this.run + 1 : 0;
    if (ok) this.reused.push(i);
    return ok;
  }

  /** New copies of the cached velocities (the sampler frees what it is given). */
  cached(e: Engine): Velocities {
    if (!this.last) throw new Error('StepCache: nothing cached');
    return { video: copy(e, this.last.gpu.video), audio: copy(e, this.last.gpu.audio) };
  }

  /** Records the velocities computed at step i (copied; the caller keeps its tensors). */
  async record(e: Engine, i: number, v: Velocities): Promise<void> {
    const [hv, ha] = [await e.read(v.video), await e.read(v.audio)];
    const host = new Float32Array(hv.length + ha.length);
    host.set(hv);
    host.set(ha, hv.length);
    if (this.last) {
      this.change = relativeL1(host, this.last.host) / (i - this.last.step);
      this.changes.push(this.change);
      this.last.gpu.video.free();
      this.last.gpu.audio.free();
    }
    this.last = { step: i, gpu: { video: copy(e, v.video), audio: copy(e, v.audio) }, host };
  }

  free(): void {
    this.last?.gpu.video.free();
    this.last?.gpu.audio.free();
    this.last = null;
  }
}

/** sum |a - b| / sum |b| (0 when both are 0). */
export function relativeL1(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += Math.abs(a[i]! - b[i]!);
    den += Math.abs(b[i]!);
  }
  return den === 0 ? (num === 0 ? 0 : Infinity) : num / den;
}
