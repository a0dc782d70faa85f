// The profiles a GPU worker serves: one entry per (kind, profile), each building the model pipeline behind it.
// The built-in entries are in profiles/ (video, image, speech); tests add their own (main.ts, KILN_WORKER_PIPELINES).
import type { LoraModel, ProfileSuggestion, TaskKind } from '../catalog';
import type { Pipeline } from '../models/common/pipeline';
import { findProfile, MAX_STEPS } from '../catalog';
import type { Accepts, ServedSummary, WeightsState, WorkerTask } from './protocol';

/** How the worker serves one profile: the entry that builds its model pipeline, with the weights state and what it
 * accepts (reported at hello as a ServedSummary). */
export interface ServedEntry {
  kind: TaskKind;
  profile: string;
  /** Builds an unloaded pipeline that takes the protocol's task (mapped to the model's own task type inside). */
  create(): Pipeline<WorkerTask>;
  weights(): WeightsState;
  /** Free text shown with the weights state (checkpoint path, or what is missing). */
  note?(): string;
  /** Short requests a client waits on (speech): they go ahead of queued jobs, and run at a running job's safe
   * point when `residentBytes` fits beside it. */
  interactive?: boolean;
  /** GPU bytes the loaded pipeline holds (weights and working set), for the fits-beside check. */
  residentBytes?(): number;
  /** What its pipeline can run; default: any step count, the catalog's input limits. */
  accepts?: Accepts;
  /** What the weights it runs now were made for, when narrow (a trained demo): /api/config's `suggested`. */
  suggested?(): ProfileSuggestion | undefined;
  /** The model a job's LoRAs go on, at the sizes of the weights it would load now; absent or undefined: no LoRAs. */
  lora?(): LoraModel | undefined;
}

/** `{ suggested }` when the entry has a suggestion now, else nothing (the field stays out of the JSON). */
function suggestionOf(e: ServedEntry): { suggested?: ProfileSuggestion; lora?: LoraModel } {
  const suggested = e.suggested?.();
  const lora = e.lora?.();
  return { ...(suggested ? { suggested } : {}), ...(lora ? { lora } : {}) };
}

/** An entry's Accepts, the catalog's limits where it declares none. */
export function acceptsOf(e: ServedEntry): Accepts {
  if (e.accepts) return e.accepts;
  const p = e.kind === 'tts' ? undefined : findProfile(e.kind, e.profile);
  return { steps: { min: 1, max: MAX_STEPS }, images: p?.max_images ?? 0, audios: p?.max_audios ?? 0 };
}

export class ProfileRegistry {
  private readonly entries = new Map<string, ServedEntry>();

  /** Adds an entry; one registered later for the same (kind, profile) replaces it. */
  register(entry: ServedEntry): void {
    this.entries.set(`${entry.kind}/${entry.profile}`, entry);
  }

  get(kind: string, profile: string): ServedEntry | undefined {
    return this.entries.get(`${kind}/${profile}`);
  }

  /** Drops every entry whose profile is not in `profiles`. */
  keepOnly(profiles: readonly string[]): void {
    for (const [key, e] of this.entries) if (!profiles.includes(e.profile)) this.entries.delete(key);
  }

  all(): ServedEntry[] {
    return [...this.entries.values()];
  }

  /** What the worker tells the API it serves (hello, and when it changes). */
  served(): ServedSummary[] {
    return this.all().map((e) => ({ kind: e.kind, profile: e.profile, interactive: e.interactive === true, weights: e.weights(), note: e.note?.() ?? '', accepts: acceptsOf(e), ...suggestionOf(e) }));
  }
}
