// A RunContext that measures a pipeline run stage by stage: the pool's peak bytes in use and the work the meter
// counted (dispatches, FLOPs, bytes) between one stage() and the next, plus the sampling steps reported. The same
// on a device and on the shape-only engine (src/engine/plan-device.ts), which is how a plan is made and how a test
// holds a plan to the real run.
import { STAGE, type Stage } from '../../catalog';
import type { Engine } from '../../engine/engine';
import { shapesSince, workByRateSince, workSince, type RateClass, type ShapeWork, type Work } from '../../engine/meter';
import type { RunContext } from './pipeline';

export interface StageCost {
  stage: Stage;
  /** Most bytes the pool held in use during the stage (weights and everything live). */
  peakGpuBytes: number;
  /** Bytes in use when the stage ended (after a load stage: what it left resident). */
  heldGpuBytes: number;
  work: Work;
  /** The same work per rate class (meter.ts: GEMM by shape class, attention, convolution, memory-bound). */
  byRate: Record<RateClass, Work>;
  /** The GEMMs' and attentions' work per shape (meter.ts gemmShape, attentionShape). */
  shapes: Map<string, ShapeWork>;
  /** Sampling steps reported in the stage (progress calls past 0). */
  steps: number;
}

export class StageMeter {
  readonly stages: StageCost[] = [];
  private open: { stage: Stage; work: Work; byRate: Record<RateClass, Work>; shapes: Map<string, ShapeWork>; steps: number } | null = null;

  constructor(private readonly e: Engine) {}

  /** The context to hand the pipeline's load() and run(); `signal` to cancel, as the runner's. */
  context(signal: AbortSignal = new AbortController().signal): RunContext {
    return {
      signal,
      stage: (s) => this.enter(s),
      progress: (done) => {
        if (this.open && done > 0) this.open.steps++;
      },
      safePoint: async () => {},
    };
  }

  /** Starts stage `s` (closing the one open); a stage entered again while open goes on. */
  enter(s: Stage): void {
    if (this.open?.stage === s) return;
    this.close();
    this.e.pool.resetPeaks();
    this.open = { stage: s, work: this.e.recorder.meter.snapshot(), byRate: this.e.recorder.meter.snapshotByRate(), shapes: this.e.recorder.meter.snapshotShapes(), steps: 0 };
  }

  /** Closes the open stage and returns every stage measured, in order (stages entered twice appear twice). */
  finish(): StageCost[] {
    this.close();
    return this.stages;
  }

  /** The largest peak of any stage. */
  get peakGpuBytes(): number {
    return Math.max(0, ...this.stages.map((s) => s.peakGpuBytes));
  }

  private close(): void {
    const o = this.open;
    if (!o) return;
    this.open = null;
    const st = this.e.pool.stats();
    this.stages.push({ stage: o.stage, peakGpuBytes: st.peakInUseBytes, heldGpuBytes: st.inUseBytes, work: workSince(this.e.recorder.meter.snapshot(), o.work),
      byRate: workByRateSince(this.e.recorder.meter.snapshotByRate(), o.byRate), shapes: shapesSince(this.e.recorder.meter.snapshotShapes(), o.shapes), steps: o.steps });
  }
}

/** Runs load for the task (as the runner does, in stage 加载模型: a fresh pipeline loads placed for it, a loaded one
 * re-places for it) and then the task, measured. */
export async function measureRun<T>(e: Engine, pipe: { load(ctx: RunContext, next?: T): Promise<void>; run(task: T, ctx: RunContext): Promise<void> }, task: T): Promise<StageCost[]> {
  const m = new StageMeter(e);
  const ctx = m.context();
  m.enter(STAGE.loadModel);
  await pipe.load(ctx, task);
  await pipe.run(task, ctx);
  await e.sync();
  return m.finish();
}
