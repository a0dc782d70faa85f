// The task protocol between the API process and a GPU worker process (docs/architecture.md). Typed, versioned,
// small: a task names its input files under DATA_DIR/inputs and its output file; no large data ever travels in a
// message. Today the messages go over the IPC channel of the worker the API starts (src/scheduler/local-worker.ts);
// the same messages are what a worker on another host will exchange through a shared queue.
//
// This module is imported by both processes, so it holds types and plain data only: no engine, no models.
import type { Accepts, LoraModel, ProfileSuggestion, Stage, TaskKind } from '../catalog';
import type { WorkerTask } from '../catalog/tasks';

/** Bumped when a message changes shape; the API refuses a worker that says another version at hello. 3: a video task
 * no longer carries `seconds` (the worker runs `frames`). 4: an image task may carry `loras`, which a worker of 3
 * would run without (issue 46). 5: a video task may carry `loras` too. */
export const PROTOCOL_VERSION = 5;

// The tasks (what a worker runs: VideoTask, ImageTask, SpeechTask) are the catalog's (catalog/tasks.ts), so a model's
// folder maps them onto its own task without importing the worker; the job store keeps their params as they are.
export type { ImageParams, ImageTask, SpeechParams, SpeechTask, VideoParams, VideoTask, WorkerTask } from '../catalog/tasks';

/** Why a task failed, for the API to act on: `bad_input` is the user's (a 400 for a speech request), `unavailable`
 * means the worker has no model for the profile, `cancelled` / `interrupted` answer a cancel, `shutdown` a stop. */
export type FailCode = 'bad_input' | 'unavailable' | 'cancelled' | 'interrupted' | 'shutdown' | 'error';

/** Where a profile's weights stand: real checkpoint, the tiny demo one, or none (README "Weights"). */
export type WeightsState = 'real' | 'demo' | 'missing';

/** What a profile's pipeline can run (the catalog's capability table entry plus the worker's run-time facts:
 * catalog/capabilities.ts acceptsFor), so the API refuses at creation what it would fail on. */
export type { Accepts };

/** What a worker says of one entry it serves (a ServedEntry of worker/registry.ts): the profile, its weights state and
 * what it accepts, as /api/config shows it. */
export interface ServedSummary {
  kind: TaskKind;
  profile: string;
  /** Short requests a client waits on (speech): they go ahead of queued jobs and may run at a job's safe point. */
  interactive: boolean;
  weights: WeightsState;
  /** Free text shown with the weights state (checkpoint path, or what is missing). */
  note: string;
  accepts: Accepts;
  /** What the weights it runs now were made for (a trained demo checkpoint), if narrow. */
  suggested?: ProfileSuggestion;
  /** The model (and its sizes) a job's LoRAs are applied to, for the weights it would load now; absent: the entry
   * takes no LoRAs. The API checks a LoRA file against it before queueing (src/loras/). */
  lora?: LoraModel;
}

/** The worker process's host memory, in bytes: its resident set, what the host (or its cgroup) still has
 * available, and the limit that applies (the cgroup's when one is set, else the host's total). */
export interface HostMemory {
  rss: number;
  available: number;
  limit: number;
}

/** The API -> worker messages. */
export type ToWorker =
  | { type: 'run'; task: WorkerTask }
  /** Stop a task: a waiting one is dropped (failed `cancelled`), a running one stops at its next check. */
  | { type: 'cancel'; id: string; reason: 'cancelled' | 'interrupted' }
  /** Stop the running task (failed `shutdown`), unload the models, exit 0. */
  | { type: 'shutdown' };

/** The worker -> API events. Every event of a task carries its id. */
export type FromWorker =
  /** First message once the worker can take tasks; `gpu` is its adapter (or why there is none): /api/health's gpu. */
  | { type: 'hello'; version: number; pid: number; name: string; profiles: ServedSummary[]; gpu: Record<string, unknown> }
  /** The served profiles changed (a weights pull finished, a demo checkpoint was generated). */
  | { type: 'profiles'; profiles: ServedSummary[] }
  | { type: 'started'; id: string }
  | { type: 'stage'; id: string; stage: Stage }
  /** one_off_s: seconds of one-off work in the run so far (as compile_s below): the ETA times steps without it. */
  | { type: 'progress'; id: string; value: number; max: number; one_off_s?: number }
  /** A live preview (PREVIEWS on): a webp of where sampling is going after step `step` of `max`, base64. */
  | { type: 'preview'; id: string; step: number; max: number; width: number; height: number; webp: string }
  /** A model was loaded for the task (`load_s` seconds, `gpu_bytes` held). */
  | { type: 'loaded'; id: string; profile: string; load_s: number; gpu_bytes: number }
  /** compile_s: seconds of one-off work in the run: shaders compiled, and work a loaded model does once
   * (RunContext.oneOff: a preview projection's fit), which the ETA leaves out of the class's time; compile_tail_s:
   * the part of it after the last progress report. */
  | { type: 'done'; id: string; output: string; exec_s: number; compile_s?: number; compile_tail_s?: number; meta?: Record<string, unknown> }
  | { type: 'failed'; id: string; code: FailCode; message: string }
  /** Every second from the worker's event loop: proof it is not stuck in a native call. */
  | { type: 'heartbeat'; running: string[]; loaded: string[]; memory?: Record<string, number>; host_memory?: HostMemory }
  /** The worker is about to exit on its own (an uncaught error, a lost device): why. */
  | { type: 'fatal'; message: string };

/** Profile entries of the caller's own that a worker loads besides (or instead of) the built-in models: tests and
 * benches. `require(module)[export](...args)` must return a ServedEntry or a list of them; a later entry for the
 * same (kind, profile) replaces an earlier one. A local worker gets them as JSON in KILN_WORKER_PIPELINES. */
export interface PipelineModule {
  module: string;
  export: string;
  args?: unknown[];
}

/** The environment variables a local worker is started with beyond the settings it shares with the API. */
export const WORKER_ENV = {
  /** JSON list of PipelineModule. */
  pipelines: 'KILN_WORKER_PIPELINES',
  /** `0`: serve only the PipelineModule entries, not the built-in models. */
  builtins: 'KILN_WORKER_BUILTINS',
} as const;

// ---- many hosts (QUEUE=redis; docs/deploy.md): the same messages through Redis ----

/** Redis keys and names shared by the API and the workers. */
export const REDIS_KEYS = {
  /** Set of the names of the workers that have said hello. */
  workers: 'kiln:workers',
  /** A worker's heartbeat (a WorkerBeat as JSON), rewritten every second, expiring when it stops. */
  worker: (name: string) => `kiln:worker:${name}`,
  /** Pub/sub channel of a worker's Control messages. */
  control: (name: string) => `kiln:ctl:${name}`,
  /** Set while a task is to stop (a cancel the worker may have missed while disconnected). */
  cancel: (id: string) => `kiln:cancel:${id}`,
  /** The BullMQ queue a worker takes its tasks from. */
  queue: (name: string) => `kiln-w-${name.replace(/[^\w.-]/g, '_')}`,
} as const;

/** What a worker publishes about itself every second. */
export interface WorkerBeat {
  version: number;
  name: string;
  host: string;
  pid: number;
  profiles: ServedSummary[];
  gpu: Record<string, unknown>;
  loaded: string[];
  running: string[];
  memory?: Record<string, number>;
  /** Unix seconds of this beat, and of the worker's start. */
  at: number;
  started_at: number;
}

/** API -> one worker, on its control channel. `exit`: stop now (the host's supervisor starts it again). */
export type Control = { type: 'cancel'; id: string; reason: 'cancelled' | 'interrupted' } | { type: 'exit'; reason: string };

/** A task's end through BullMQ: the return value of a done task; a failed one's failedReason is a FailedReason JSON. */
export interface TaskResult {
  output: string;
  exec_s: number;
  compile_s?: number;
  compile_tail_s?: number;
}
export interface FailedReason {
  code: FailCode;
  message: string;
}
