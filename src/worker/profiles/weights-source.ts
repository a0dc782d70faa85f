// What every built-in profile entry needs around its model: real weights in WEIGHTS_DIR when the profile's
// variant is complete (npm run weights -- pull <profile>), else a tiny random checkpoint of the same architecture
// generated once into DEMO_WEIGHTS_DIR; the state and note /api/config shows; and the GPU bytes the loaded model
// holds, estimated from the files until a load measures them (the runner's fits-beside check).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { DemoVideo } from '../../config/settings';
import type { Engine } from '../../engine/engine';
import type { Pipeline } from '../../models/common/pipeline';
import type { ComfyFolders } from '../../weights/comfyui';
import { checkProfile, demoCheckpointVersion, ensureDemoCheckpoint, profileChecker, weightsNote, weightsState, type ProfileWeights } from '../../weights';
import type { WeightsState, WorkerTask } from '../protocol';

/** The parts of the worker's settings an entry reads. */
export interface WeightsDirs {
  weightsDir: string;
  /** The Hugging Face hub cache, read in place (src/weights/hub-cache.ts); absent: WEIGHTS_DIR only. */
  hubCacheDir?: string;
  /** ComfyUI's model folders, read in place (src/weights/comfyui.ts); absent: not looked at. */
  comfyFolders?: ComfyFolders;
  demoWeightsDir: string;
  /** DEMO_VIDEO: `random` runs the video profiles on the random demo even where the trained one is committed. */
  demoVideo?: DemoVideo;
}

/** A demo checkpoint generator (the models' planDemo* functions): bump `version` when its output changes. */
export interface DemoPlan {
  version: string | number;
  write(dir: string): Promise<void>;
}

export interface WeightsSourceSpec {
  /** The weights manifests' profile name. */
  profile: string;
  /** Says what runs, for the note: "Qwen-Image-2.1, int8 transformer linears". */
  model: string;
  /** The demo note's middle: "a tiny random Qwen-Image-2.1 checkpoint". */
  demoModel: string;
  /** What the demo gives: "the pictures are noise". */
  demoResult: string;
  /** When the demo checkpoint is made: "the first image job". */
  demoWhen: string;
  /** GPU working set on top of the weights (activations, caches, decoders), for the fits-beside estimate. */
  workingBytes: number;
  /** Weight bytes on the GPU before a first load measured them: from the real files, or the demo's few MB. */
  estimateBytes(w: ProfileWeights): number;
}

export class WeightsSource {
  /** One folder check per second for config/health. */
  private readonly check: () => ProfileWeights;
  private measured: number | undefined;

  constructor(
    private readonly spec: WeightsSourceSpec,
    private readonly dirs: WeightsDirs,
  ) {
    this.check = profileChecker(spec.profile, dirs);
  }

  /** The profile's weights as last checked (at most a second old). */
  profileWeights(): ProfileWeights {
    return this.check();
  }

  state(): WeightsState {
    return weightsState(this.check(), true);
  }

  /** What the folders hold now (checked at most once a second). */
  weights(): ProfileWeights {
    return this.check();
  }

  note(): string {
    const w = this.check();
    if (w.state === 'real') return `${this.spec.model} ${weightsNote(w)}`;
    const made = demoCheckpointVersion(this.dirs.demoWeightsDir, w.demo) ? 'generated' : `generated at ${this.spec.demoWhen}`;
    return `demo: ${this.spec.demoModel} (${made}, ${join(this.dirs.demoWeightsDir, w.demo)}); ${this.spec.demoResult}. Real weights: ${weightsNote(w)}`;
  }

  /** GPU bytes of the loaded model: measured at the last load, else estimated from the files. */
  residentBytes(): number {
    return this.measured ?? this.spec.estimateBytes(this.check()) + this.spec.workingBytes;
  }

  /** Records what a load measured. */
  loaded(weightBytes: number): void {
    this.measured = weightBytes + this.spec.workingBytes;
  }

  /**
   * The checkpoint to load, decided at load time (a pull may finish while the service runs): `real(w)` of the
   * complete variant, or the root of the demo checkpoint, generated on first use.
   */
  async choose<T>(e: Engine, o: { real(w: ProfileWeights): T; demo(root: string): T; plan(e: Engine): Promise<DemoPlan> }): Promise<T> {
    const w = checkProfile(this.spec.profile, this.dirs);
    if (w.state === 'real') return o.real(w);
    const plan = await o.plan(e);
    return o.demo(await ensureDemoCheckpoint({ name: w.demo, version: plan.version, root: this.dirs.demoWeightsDir, generate: plan.write }));
  }
}

/** A model pipeline behind the protocol's task: `map` builds the model's own task type at the worker's edge. */
export function taskPipeline<T, K extends WorkerTask['kind']>(inner: Pipeline<T>, kind: K, map: (task: Extract<WorkerTask, { kind: K }>) => T): Pipeline<WorkerTask> {
  return {
    load: (ctx, next) => inner.load(ctx, next?.kind === kind ? map(next as Extract<WorkerTask, { kind: K }>) : undefined),
    prepare: async (ctx, next) => {
      if (next.kind === kind) await inner.prepare?.(ctx, map(next as Extract<WorkerTask, { kind: K }>));
    },
    run: (task, ctx) => {
      if (task.kind !== kind) throw new Error(`a ${kind} pipeline was given a ${task.kind} task`);
      return inner.run(map(task as Extract<WorkerTask, { kind: K }>), ctx);
    },
    unload: () => inner.unload(),
  };
}

/** Bytes of a .safetensors file, or of the .safetensors files in a folder (0 when it is absent). */
export function safetensorsBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  if (statSync(dir).isFile()) return statSync(dir).size;
  return readdirSync(dir).filter((f) => f.endsWith('.safetensors')).reduce((a, f) => a + statSync(join(dir, f)).size, 0);
}
