// A task whose files are objects (s3://bucket/key, STORAGE=s3) made runnable on this host: its inputs downloaded into
// a private temp folder, its output written there, then uploaded to the key the API named. Tasks with local paths
// (one host) pass through unchanged.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { S3Store } from '../storage/s3-store';
import type { WorkerTask } from './protocol';

export interface LocalTask {
  /** The task with local paths. */
  task: WorkerTask;
  /** After a done run: puts the output where the API expects it; resolves with the API's name for it. */
  deliver(): Promise<string>;
  /** Removes the temp folder (always, done or not). */
  cleanup(): Promise<void>;
}

const TYPES: Record<string, string> = { '.png': 'image/png', '.mp4': 'video/mp4', '.wav': 'audio/wav' };

export async function localizeTask(task: WorkerTask, store: S3Store | undefined): Promise<LocalTask> {
  const outKey = store?.keyOf(task.output);
  if (!store || outKey === undefined) return { task, deliver: async () => task.output, cleanup: async () => {} };
  const dir = await mkdtemp(join(tmpdir(), `kiln-task-`));
  try {
    const fetch = async (refs: string[], prefix: string) =>
      Promise.all(refs.map(async (ref, i) => {
        const key = store.keyOf(ref);
        if (key === undefined) return ref;
        const local = join(dir, `${prefix}-${i}-${basename(key)}`);
        await store.download(key, local);
        return local;
      }));
    const output = join(dir, basename(outKey));
    const local = { ...task, images: await fetch(task.images, 'image'), audios: await fetch(task.audios, 'audio'), output } as WorkerTask;
    return {
      task: local,
      deliver: async () => {
        await store.put(outKey, output, TYPES[output.slice(output.lastIndexOf('.'))] ?? 'application/octet-stream');
        return task.output;
      },
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
