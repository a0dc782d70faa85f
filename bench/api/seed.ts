// 1000 finished jobs written straight into the job store, shaped as the service itself stores them: video and
// image mixed, done and failed, with prompts of a realistic length, one minute apart (newest last).
import { newJobId } from '../../src/jobs/job-id';
import type { JobRecord } from '../../src/jobs/job.model';
import { JobStore } from '../../src/jobs/job.store';

const PROMPT = 'A slow dolly shot through a rain-soaked night market, neon signs reflecting in puddles, steam rising from food stalls, a vendor says "last bowl of the night", ambient chatter and sizzling woks';

export function storedJob(i: number, createdS: number): JobRecord {
  const video = i % 3 !== 0; // two thirds video, like a video-first service
  const failed = i % 10 === 7;
  const id = newJobId(new Date(createdS * 1000));
  const started = createdS + 0.5;
  const finished = started + (video ? 27 : 4.5);
  const common = {
    id, status: failed ? 'failed' : 'done', created: createdS, started, finished, callback_url: null, inputs: { images: [] as string[], audios: [] as string[] },
  } as const;
  const task = { prompt: `${PROMPT} (#${i})`, seed: 100000 + i };
  const outcome = failed ? { error: 'the pipeline ran out of GPU memory at step 5 (try a lower res)' } : { exec_s: finished - started, output: `${id}${video ? '.mp4' : '.png'}` };
  if (video) {
    return {
      ...common, ...outcome, kind: 'video', profile: 'fastvid', aspect: '16:9', res: '480p', size: '864x480', seconds: 5,
      task: { ...task, mode: 't2v', frames: 124, steps: 8, width: 864, height: 480, image_mode: 'keyframe', audio_mode: 'voice', tts_text: '', tts_ref_text: '', tts_language: 'Auto' },
    };
  }
  return {
    ...common, ...outcome, kind: 'image', profile: 'imgmain', aspect: '1:1', res: '1K', size: '1024x1024', size_from_ref: false,
    task: { ...task, mode: 't2i', steps: 25, negative: '', cfg: 1, width: 1024, height: 1024, res: '1K' },
  };
}

/** Writes `n` finished jobs into DATA_DIR's store (before the server opens it) and returns their ids. */
export function seedJobs(dataDir: string, n: number): string[] {
  const store = new JobStore(dataDir);
  const now = Date.now() / 1000;
  const ids: string[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const job = storedJob(i, Math.round((now - (n - i) * 60) * 1000) / 1000);
      store.insert(job);
      ids.push(job.id);
    }
  } finally {
    store.close();
  }
  return ids;
}
