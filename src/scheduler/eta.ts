// Expected seconds until a job finishes (the job object's eta_s; README "ETA"): what jobs of the same class took on
// this machine (kind, profile, size, seconds, steps: a running mean kept in the store), a documented first guess for
// a class never measured, and the model's load time added wherever the GPU must switch models on the way.
import type { WorkerTask } from '../worker/protocol';

/** Running means of measured seconds, by key (kept in the job database: src/jobs/runtime.store.ts). */
export interface RuntimeStats {
  get(key: string): number | undefined;
  add(key: string, seconds: number): void;
}

/** Seconds to load a profile's model before anything of it was measured. */
export const FIRST_LOAD_S = 20;

/** The class a job's runtime is predicted from: same kind, profile, size, clip length and steps. */
export function runtimeClass(task: WorkerTask): string {
  if (task.kind === 'tts') return `tts/${task.profile}`;
  const p = task.params;
  return `${task.kind}/${task.profile}/${p.width}x${p.height}/${task.kind === 'video' ? task.params.frames : '-'}/${p.steps}`;
}

/**
 * First guesses, in seconds, before this machine has run a job of the class (a GPU of the spec's class: imgmain 1K 25
 * steps about 5 s, fastvid 480p 5 s about 27 s; a software GPU is far slower, and its first measurement replaces
 * the guess): image 2 + 0.15 s per step per megapixel, video 5 + 2.5 s per step per 480p-5 s of pixels x frames,
 * speech 5.
 */
export function firstGuessS(task: WorkerTask): number {
  if (task.kind === 'tts') return 5;
  const { width, height, steps } = task.params;
  if (task.kind === 'image') return 2 + 0.15 * steps * ((width * height) / 1024 ** 2);
  return 5 + 2.5 * steps * ((width * height * task.params.frames) / (864 * 480 * 124));
}

export class EtaModel {
  constructor(private readonly stats: RuntimeStats) {}

  /** Expected run seconds of the task, its model already loaded. */
  runS(task: WorkerTask): number {
    return this.stats.get(`run/${runtimeClass(task)}`) ?? firstGuessS(task);
  }

  /** Expected seconds to load the model of `profileKey` (kind/profile). */
  loadS(profileKey: string): number {
    return this.stats.get(`load/${profileKey}`) ?? FIRST_LOAD_S;
  }

  recordRun(task: WorkerTask, seconds: number): void {
    this.stats.add(`run/${runtimeClass(task)}`, Math.max(0, seconds));
  }

  recordLoad(profileKey: string, seconds: number): void {
    this.stats.add(`load/${profileKey}`, Math.max(0, seconds));
  }
}

export const profileKey = (task: WorkerTask) => `${task.kind}/${task.profile}`;

/** The job on the GPU: when it started (seconds), and the seconds it was expected to take in all. */
export interface RunningEta {
  started: number;
  expectedS: number;
}

/** One GPU worker as the ETA sees it: the job it runs (if any), the model it holds for jobs, what it serves. */
export interface EtaWorker {
  running?: RunningEta & { id: string; key: string };
  /** kind/profile of the model it holds for jobs. */
  key?: string;
  serves(task: WorkerTask): boolean;
}

/**
 * Seconds until each job finishes: a running one's expected total less what has elapsed (never below 0); then the
 * queue in its order, each job going to the worker that serves it and frees up first (a tie goes to the one holding
 * its model), adding its expected run and, where that worker must switch models, the model's load. A job no worker
 * serves gets none. With one worker this is the sum of everything ahead.
 */
export function fleetEtas(now: number, workers: readonly EtaWorker[], queue: readonly WorkerTask[], model: EtaModel): Map<string, number> {
  const out = new Map<string, number>();
  const state = workers.map((w) => {
    const free = w.running ? Math.max(0, w.running.expectedS - (now - w.running.started)) : 0;
    if (w.running) out.set(w.running.id, free);
    return { w, free, key: w.running?.key ?? w.key };
  });
  for (const task of queue) {
    const k = profileKey(task);
    let best: (typeof state)[number] | undefined;
    for (const s of state) {
      if (!s.w.serves(task)) continue;
      if (!best || s.free < best.free || (s.free === best.free && s.key === k && best.key !== k)) best = s;
    }
    if (!best) continue;
    best.free += model.runS(task) + (best.key !== k ? model.loadS(k) : 0);
    best.key = k;
    out.set(task.id, best.free);
  }
  return out;
}

/** fleetEtas for one worker that serves everything: `running` its job, `loadedKey` the model it holds when idle. */
export function queueEtas(now: number, running: (RunningEta & { id: string; key: string }) | undefined, queue: readonly WorkerTask[], model: EtaModel, loadedKey?: string): Map<string, number> {
  return fleetEtas(now, [{ running, key: loadedKey, serves: () => true }], queue, model);
}
