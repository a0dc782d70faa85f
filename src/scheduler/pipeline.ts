import type { Stage } from '../catalog';

/** What a running pipeline reports and checks. `signal` fires on cancel/interrupt: check it (throwIfCancelled)
 * at least between sampling steps and between stages. */
export interface RunContext {
  readonly signal: AbortSignal;
  stage(stage: Stage): void;
  progress(value: number, max: number): void;
  /** A safe point between two sampling steps: the scheduler may run waiting interactive requests (speech)
   * here, beside this pipeline, when their model fits in GPU memory next to it. Call it where no GPU work of
   * this job is pending that the interactive request could disturb (tensors stay allocated; that is fine). */
  safePoint(): Promise<void>;
}

/** One model behind one (kind, profile). The scheduler keeps at most one loaded at a time: a task for another
 * profile unloads the current pipeline, then loads the next (stage 加载模型). */
export interface Pipeline<Task = unknown> {
  load(ctx: RunContext): Promise<void>;
  run(task: Task, ctx: RunContext): Promise<void>;
  unload(): Promise<void>;
}

/** Where a profile's weights stand, for /api/config and /api/health. */
export type WeightsState = 'real' | 'demo' | 'missing';

export interface PipelineEntry {
  kind: string;
  profile: string;
  /** Builds an unloaded pipeline. */
  create(): Pipeline<any>;
  weights(): WeightsState;
  /** Free text shown with the weights state (checkpoint path, or what is missing). */
  note?(): string;
  /** Short requests a client waits on (speech): they go ahead of queued jobs, and run at a running job's
   * safe point when `residentBytes` fits beside it. */
  interactive?: boolean;
  /** GPU bytes the loaded pipeline holds (weights and working set), for the fits-beside check. */
  residentBytes?(): number;
}

/** Pipelines register per kind/profile behind one interface; models arrive in their own modules. */
export class PipelineRegistry {
  private readonly entries = new Map<string, PipelineEntry>();

  register(entry: PipelineEntry): void {
    this.entries.set(`${entry.kind}/${entry.profile}`, entry);
  }

  get(kind: string, profile: string): PipelineEntry | undefined {
    return this.entries.get(`${kind}/${profile}`);
  }

  all(): PipelineEntry[] {
    return [...this.entries.values()];
  }
}
