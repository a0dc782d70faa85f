// The GPU worker's Runner (src/worker/runner.ts) in-process: tasks of a few kinds, and the protocol events it
// reports gathered so tests can wait for a task's end.
import type { FromWorker, WorkerTask } from '../../src/worker/protocol';
import { ProfileRegistry, type ServedEntry } from '../../src/worker/registry';
import { Runner, type RunnerOptions } from '../../src/worker/runner';

export type Ended = Extract<FromWorker, { type: 'done' | 'failed' }>;

/** A video task (profile a or b by default) or a speech task: only the id, kind and profile matter here. */
export const job = (id: string, profile = 'a'): WorkerTask => ({
  id, kind: 'video', profile, images: [], audios: [], output: '/dev/null',
  params: { prompt: id, seed: 0, steps: 1, width: 64, height: 64, frames: 5, mode: 't2v', image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
});
export const speech = (id: string): WorkerTask => ({ id, kind: 'tts', profile: 'tts', images: [], audios: [], output: '/dev/null', params: { text: id, language: 'Auto', ref_text: '' } });

/** A Runner over `entries`, with every event it reports and a way to wait for a task's end. */
export function runnerWith(entries: ServedEntry[], o: RunnerOptions = {}) {
  const registry = new ProfileRegistry();
  for (const e of entries) registry.register(e);
  const events: FromWorker[] = [];
  const waiting = new Map<string, (e: Ended) => void>();
  const runner = new Runner(registry, (e) => {
    events.push(e);
    if ((e.type === 'done' || e.type === 'failed') && waiting.has(e.id)) waiting.get(e.id)!(e);
  }, o);
  const ended = (id: string): Promise<Ended> => {
    const already = events.find((e): e is Ended => (e.type === 'done' || e.type === 'failed') && e.id === id);
    return already ? Promise.resolve(already) : new Promise((resolve) => waiting.set(id, resolve));
  };
  /** Enqueues and resolves with its end. */
  const run = (task: WorkerTask) => {
    const end = ended(task.id);
    runner.enqueue(task);
    return end;
  };
  return { runner, events, ended, run };
}
