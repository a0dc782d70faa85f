// Expected seconds until a job finishes (the job object's eta_s; README "ETA"): what jobs of the same class took on
// this machine (kind, profile, size, seconds, steps: a running mean kept in the store, without the model's load and
// the shaders compiled during a run, which the scheduler takes out as it records one); for a class never run, what
// this machine measured for the profile at another size, scaled by size (pixels x frames) and steps; a documented
// first guess for a profile never measured; the model's load time added wherever the GPU must switch models on the
// way. A running job's own progress rate (seconds per step as it goes) replaces the expectation once it has one, and
// a job still running never shows 0.
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

/** What a step's and the decode's work scale with: megapixel-frames (an image is one frame; speech: 1). */
export function workUnits(task: WorkerTask): number {
  if (task.kind === 'tts') return 1;
  const { width, height } = task.params;
  return (width * height * (task.kind === 'video' ? task.params.frames : 1)) / 1e6;
}

/** How a finished run divided its time: seconds per sampling step, and seconds from the last step to the end. */
export interface RunSplit {
  stepS: number;
  postS: number;
}

export class EtaModel {
  constructor(private readonly stats: RuntimeStats) {}

  /** Expected run seconds of the task, its model already loaded: its class's mean; else the profile's measured
   * seconds per step and per unit of work, and the rest of a run per unit of work, scaled to its size and steps;
   * else the first guess. */
  runS(task: WorkerTask): number {
    const measured = this.stats.get(`run/${runtimeClass(task)}`);
    if (measured !== undefined) return measured;
    const k = profileKey(task);
    const step = this.stats.get(`step/${k}`);
    const rest = this.stats.get(`rest/${k}`);
    if (task.kind !== 'tts' && step !== undefined && rest !== undefined) return (step * task.params.steps + rest) * workUnits(task);
    return firstGuessS(task);
  }

  /** Expected seconds from the last sampling step to the end (decoding, saving), if this machine measured any. */
  postS(task: WorkerTask): number | undefined {
    const measured = this.stats.get(`post/${runtimeClass(task)}`);
    if (measured !== undefined) return measured;
    const perUnit = this.stats.get(`postu/${profileKey(task)}`);
    return perUnit === undefined ? undefined : perUnit * workUnits(task);
  }

  /** A finished run's split (its sampling steps timed as they came): kept per class, and per profile per unit of work
   * for the classes not run yet. */
  recordSplit(task: WorkerTask, runS: number, split: RunSplit): void {
    if (task.kind === 'tts') return;
    const k = profileKey(task);
    const units = workUnits(task);
    this.stats.add(`post/${runtimeClass(task)}`, Math.max(0, split.postS));
    this.stats.add(`postu/${k}`, Math.max(0, split.postS) / units);
    this.stats.add(`step/${k}`, Math.max(0, split.stepS) / units);
    this.stats.add(`rest/${k}`, Math.max(0, runS - split.stepS * task.params.steps) / units);
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

/** The job on the GPU: when it started (seconds), the seconds it was expected to take in all, and (when known) the
 * seconds it has left by its own progress (runningLeftS). */
export interface RunningEta {
  started: number;
  expectedS: number;
  leftS?: number;
}

/** One progress report: when it came (seconds), its value, and the run's one-off seconds so far (`off`: shaders
 * compiled, a loaded model's first-use work; reported by the worker, 0 where it says none). */
export interface ProgressPoint {
  at: number;
  value: number;
  off?: number;
}

/** A series of progress reports: where it was when it began, its first move, and the latest. */
export interface ProgressSeries {
  max: number;
  from: ProgressPoint;
  /** The first report past `from` (its first step often holds one-off work: shaders compiled for a new size). */
  first?: ProgressPoint;
  last: ProgressPoint;
}

/** Seconds per unit of a progress series so far, once it has moved: counted from its first move once it has moved
 * again (leaving out the one-off work of the first step), else from its start; one-off work the worker reported
 * between the two reports left out too (a preview projection fitted at the first step's preview took 22 s of a
 * 26 s sampling on lavapipe, and made a class's measured steps 3x too slow). */
export function seriesRate(p: ProgressSeries | undefined): number | undefined {
  if (!p || p.last.value <= p.from.value) return undefined;
  const base = p.first && p.last.value > p.first.value ? p.first : p.from;
  const work = p.last.at - base.at - ((p.last.off ?? 0) - (base.off ?? 0));
  return Math.max(0, work) / (p.last.value - base.value);
}

/** The series with a new report `at` (a new series when max changes or the value goes back). */
export function nextSeries(cur: ProgressSeries | undefined, max: number, at: ProgressPoint): ProgressSeries {
  if (!cur || cur.max !== max || at.value < cur.last.value) return { max, from: at, last: at };
  return { ...cur, first: cur.first ?? (at.value > cur.from.value ? at : undefined), last: at };
}

/** What a running job shows for an estimate of `left` seconds: that, but never below 0.1 s; once it is past its
 * estimate (left negative), a tenth of how late it is: a job still working never shows 0, and a late one shows more
 * the later it is. */
export const shownLeftS = (left: number) => (left >= 0.1 ? left : Math.max(0.1, -0.1 * left));

/**
 * Seconds a running job has left. Sampling: its own seconds per step times the steps left (the step under way counted
 * from the last report), plus the time after sampling (measured for its class or profile, else a quarter of its
 * sampling). After sampling: that time less what has passed, or a later progress series' own rate (frames decoded),
 * whichever is longer. Before its first step: the expectation less what has passed. Never 0: shownLeftS.
 */
export function runningLeftS(now: number, r: { started: number; expectedS: number; steps?: ProgressSeries; after?: ProgressSeries; postS?: number }): number {
  const stepS = seriesRate(r.steps);
  let left: number;
  if (!r.steps || stepS === undefined) left = r.expectedS - (now - r.started);
  else {
    const post = r.postS ?? 0.25 * stepS * r.steps.max;
    const stepsLeft = r.steps.max - r.steps.last.value;
    const since = now - r.steps.last.at;
    if (stepsLeft > 0) left = Math.max(stepS * stepsLeft - since, stepS * (stepsLeft - 1)) + post;
    else {
      left = post - since;
      const rate = seriesRate(r.after);
      if (r.after && rate !== undefined) left = Math.max(left, rate * (r.after.max - r.after.last.value) - (now - r.after.last.at));
    }
  }
  return shownLeftS(left);
}

/** One GPU worker as the ETA sees it: the job it runs (if any), the model it holds for jobs, what it serves. */
export interface EtaWorker {
  running?: RunningEta & { id: string; key: string };
  /** kind/profile of the model it holds for jobs. */
  key?: string;
  serves(task: WorkerTask): boolean;
}

/**
 * Seconds until each job finishes: a running one's time left (its own progress, else its expected total less what
 * has elapsed; never 0: shownLeftS); then the
 * queue in its order, each job going to the worker that serves it and frees up first (a tie goes to the one holding
 * its model), adding its expected run and, where that worker must switch models, the model's load. A job no worker
 * serves gets none. With one worker this is the sum of everything ahead.
 */
export function fleetEtas(now: number, workers: readonly EtaWorker[], queue: readonly WorkerTask[], model: EtaModel): Map<string, number> {
  const out = new Map<string, number>();
  const state = workers.map((w) => {
    const free = w.running ? (w.running.leftS ?? shownLeftS(w.running.expectedS - (now - w.running.started))) : 0;
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
