import type { Stage } from '../jobs/catalog';

/** What a running pipeline reports and checks. `signal` fires on cancel/interrupt: check it (throwIfCancelled)
 * at least between sampling steps and between stages. */
export interface RunContext {
  readonly signal: AbortSignal;
  stage(stage: Stage): void;
  progress(value: number, max: number): void;
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
