// Pipelines for API tests: real files out, real progress and stages, real cooperative cancellation, but no model.
// They stand in for models only in tests, inside the real GPU worker process: a test passes `testPipeline(...)`
// (a PipelineModule: this file, an export and plain-data arguments) to startApp, and the worker calls the make*
// export to build the entry. Gates and logs reach back into the test process (control.ts).
import { createHash } from 'node:crypto';
import { previewWebp, type RgbPicture } from '../../src/models/common/latent-preview';
import { readFile, writeFile } from 'node:fs/promises';
import sharp from 'sharp';
import { STAGE } from '../../src/catalog';
import { throwIfCancelled } from '../../src/common/errors';
import { BASE_ARGS, runFfmpeg } from '../../src/media/ffmpeg';
import { commitFile, tempSibling } from '../../src/media/files';
import { wavHeader } from '../../src/media/wav';
import type { Pipeline, RunContext } from '../../src/models/common/pipeline';
import type { PipelineModule, WorkerTask } from '../../src/worker/protocol';
import type { ServedEntry } from '../../src/worker/registry';
import { logEvent, waitAtGate, type ControlRef, type EventLog, type Gate } from './control';

/** How a test pipeline misbehaves at its first step (the GPU worker fault tests). */
export type Fault =
  /** process.abort(): the worker dies by SIGABRT, as in a native fault. */
  | 'abort'
  /** An error thrown from a callback nobody awaits (as from a GPU completion callback): uncaught in the worker. */
  | 'uncaught'
  /** Never checks its cancel signal again (and never ends). */
  | 'ignore-cancel'
  /** Blocks the worker's event loop in a wait that uses no CPU, as a native call waiting on a driver that never
   * answers: no more heartbeats, no CPU time. */
  | 'block'
  /** Blocks the worker's event loop in a busy loop that never ends: no more heartbeats, a core's CPU time. */
  | 'spin';

export interface TestPipelineOptions {
  /** Milliseconds per step (default 2). */
  stepMs?: number;
  /** Must open before each step: tests hold a job in `running` with it. A cancelled step stops waiting. */
  gate?: Gate;
  /** Gets `load <profile>`, `run <job id>` and `unload <profile>`. */
  log?: EventLog;
  /** The run fails with this error after its steps. */
  fail?: string;
  fault?: Fault;
  /** At its first step, a synchronous busy loop of this many milliseconds, then it goes on (a long shader compile,
   * a CPU step on a busy machine): no heartbeats meanwhile. */
  busyMs?: number;
  /** video: a real mp4 (ffmpeg's test pattern at the task's aspect, its frame count at 24 fps, with sound)
   * instead of a byte file, for tests that read the video back. */
  mp4?: boolean;
  /** After each step but the last, a live preview through ctx.preview: a webp of a red-to-blue gradient at the task's
   * aspect, made by the real previewWebp (the page test shows it). */
  previews?: boolean;
  /** What the entry says it runs on (default 'demo'): 'real' stands in for a worker with the profile's released weights
   * (the create path then holds a job to its plan: jobs/fit-check.ts). */
  weights?: 'real' | 'demo';
}

type Wire = Omit<TestPipelineOptions, 'gate' | 'log'> & { gate?: ControlRef; log?: ControlRef };

const wire = (o: TestPipelineOptions): Wire => ({ stepMs: o.stepMs, fail: o.fail, fault: o.fault, busyMs: o.busyMs, mp4: o.mp4, previews: o.previews, weights: o.weights, gate: o.gate?.ref, log: o.log?.ref });

/** Steps `steps` times, then writes a small png (image) or a byte file (video). */
export function testPipeline(kind: 'video' | 'image', profile: string, opts: TestPipelineOptions = {}): PipelineModule {
  return { module: __filename, export: 'makeTestPipeline', args: [kind, profile, wire(opts)] };
}

/** The same entry for several profiles (the restart tests: imgmain and fastvid work, imgart_turbo fails). */
export function restartPipelines(opts: Omit<TestPipelineOptions, 'fail'>): PipelineModule[] {
  return [
    testPipeline('image', 'imgmain', opts),
    testPipeline('video', 'fastvid', opts),
    testPipeline('image', 'imgart_turbo', { ...opts, fail: 'test pipeline failure' }),
  ];
}

/** Speech that writes one second of silence; a text containing "explode" fails. `gate`: waits there first. */
export function silentSpeech(o: { gate?: Gate } = {}): PipelineModule {
  return { module: __filename, export: 'makeSilentSpeech', args: [{ gate: o.gate?.ref }] };
}

/** Speech whose samples are a function of everything the speech model is given (echoSpeechWav): the same wav
 * exactly when the worker got the same clip bytes, text, ref_text and language. */
export function echoSpeech(): PipelineModule {
  return { module: __filename, export: 'makeEchoSpeech', args: [] };
}

/** What echoSpeech writes for a clip and params: 24 kHz mono, 0.5 s + 20 ms per character of text, 16-bit samples
 * drawn from a generator seeded by the sha256 of the clip's bytes, text, ref_text and language. */
export function echoSpeechWav(clip: Buffer, p: { text: string; ref_text: string; language: string }): Buffer {
  const h = createHash('sha256').update(clip).update('\0').update(p.text).update('\0').update(p.ref_text).update('\0').update(p.language).digest();
  let x = h.readUInt32LE(0) | 1; // xorshift32
  const n = Math.round(24000 * (0.5 + 0.02 * p.text.length));
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    data.writeInt16LE(((x >>> 0) % 16001) - 8000, i * 2);
  }
  return Buffer.concat([wavHeader(24000, 1, n), data]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Keeps the thread busy for `ms` (a synchronous call: the event loop waits). */
function spin(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

// ---- built inside the GPU worker ----

export function makeTestPipeline(kind: 'video' | 'image', profile: string, o: Wire): ServedEntry {
  const log = (event: string) => (o.log ? logEvent(o.log, event) : Promise.resolve());
  return {
    kind,
    profile,
    weights: () => o.weights ?? 'demo',
    note: () => 'test pipeline',
    create(): Pipeline<WorkerTask> {
      return {
        async load(ctx: RunContext) {
          await log(`load ${profile}`);
          throwIfCancelled(ctx.signal);
        },
        async unload() {
          await log(`unload ${profile}`);
        },
        async run(task: WorkerTask, ctx: RunContext) {
          if (task.kind === 'tts') throw new Error('a job pipeline was given a speech task');
          await log(`run ${task.id}`);
          ctx.stage(STAGE.encode);
          const steps = task.params.steps;
          for (let i = 0; i < steps; i++) {
            ctx.stage(STAGE.sample);
            if (o.gate) await waitAtGate(o.gate, ctx.signal);
            if (i === 0 && o.busyMs) spin(o.busyMs);
            if (i === 0 && o.fault) await misbehave(o.fault);
            await sleep(o.stepMs ?? 2);
            throwIfCancelled(ctx.signal);
            ctx.progress(i + 1, steps);
            if (o.previews && ctx.preview && i + 1 < steps) ctx.preview({ step: i + 1, max: steps, ...(await previewWebp(gradient(task.params.width, task.params.height, (i + 1) / steps))) });
          }
          if (o.fail) throw new Error(o.fail);
          ctx.stage(STAGE.save);
          // as real pipelines write: a hidden temp sibling, flushed, then renamed
          const tmp = tempSibling(task.output);
          if (kind === 'image') {
            const { width, height, seed } = task.params;
            await sharp({ create: { width: Math.min(width, 64), height: Math.min(height, 64), channels: 3, background: { r: seed % 256, g: 0, b: 0 } } }).png().toFile(tmp);
          } else if (o.mp4 && task.kind === 'video') {
            await writeTestMp4(tmp, task.params.width, task.params.height, task.params.frames);
          } else {
            await writeFile(tmp, Buffer.from(`test video ${task.id}`));
          }
          await commitFile(tmp, task.output);
        },
      };
    },
  };
}

/** A w x h picture (scaled to 1/8) whose red falls and blue rises left to right, brighter as `t` grows. */
function gradient(width: number, height: number, t: number): RgbPicture {
  const w = Math.max(1, Math.round(width / 8));
  const hh = Math.max(1, Math.round(height / 8));
  const rgb = new Uint8Array(w * hh * 3);
  for (let y = 0; y < hh; y++) for (let x = 0; x < w; x++) rgb.set([Math.round(255 * (1 - x / w)), Math.round(120 * t), Math.round((255 * x) / w)], (y * w + x) * 3);
  return { rgb, width: w, height: hh };
}

/** ffmpeg's test pattern, 1/8 of the task's size (even sides), `frames` frames at 24 fps, a 440 Hz tone. */
async function writeTestMp4(path: string, width: number, height: number, frames: number): Promise<void> {
  const w = Math.max(2, Math.round(width / 16) * 2);
  const h = Math.max(2, Math.round(height / 16) * 2);
  const args = [...BASE_ARGS, '-loglevel', 'error', '-f', 'lavfi', '-i', `testsrc=size=${w}x${h}:rate=24`, '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=32000',
    '-frames:v', String(frames), '-shortest', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-f', 'mp4', path];
  const exit = await runFfmpeg(args, { timeoutMs: 60_000 });
  if (exit.code !== 0) throw new Error(`the test mp4: ${exit.stderr}`);
}

async function misbehave(fault: Fault): Promise<never> {
  if (fault === 'abort') process.abort();
  if (fault === 'uncaught') {
    setImmediate(() => {
      throw new Error('boom in a GPU callback');
    });
  }
  if (fault === 'block') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10 * 60_000);
  if (fault === 'spin') spin(10 * 60_000);
  for (;;) await sleep(50); // 'ignore-cancel', and whatever the others leave running
}

export function makeSilentSpeech(o: { gate?: ControlRef } = {}): ServedEntry {
  return {
    kind: 'tts',
    profile: 'tts',
    interactive: true,
    weights: () => 'demo',
    create: () => ({
      load: async () => {},
      unload: async () => {},
      run: async (task: WorkerTask, ctx: RunContext) => {
        if (task.kind !== 'tts') throw new Error('the speech pipeline was given a job');
        if (o.gate) await waitAtGate(o.gate, ctx.signal);
        throwIfCancelled(ctx.signal);
        if (task.params.text.includes('explode')) throw new Error('synthesis broke');
        const tmp = tempSibling(task.output);
        await writeFile(tmp, Buffer.concat([wavHeader(24000, 1, 24000), Buffer.alloc(48000)]));
        await commitFile(tmp, task.output);
      },
    }),
  };
}

export function makeEchoSpeech(): ServedEntry {
  return {
    kind: 'tts',
    profile: 'tts',
    interactive: true,
    weights: () => 'demo',
    create: () => ({
      load: async () => {},
      unload: async () => {},
      run: async (task: WorkerTask, ctx: RunContext) => {
        if (task.kind !== 'tts') throw new Error('the speech pipeline was given a job');
        throwIfCancelled(ctx.signal);
        const tmp = tempSibling(task.output);
        await writeFile(tmp, echoSpeechWav(await readFile(task.audios[0]!), task.params));
        await commitFile(tmp, task.output);
      },
    }),
  };
}
