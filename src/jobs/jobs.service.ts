import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { mkdir } from 'node:fs/promises';
import { removeStaleTemps } from '../media/files';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { capabilitiesOf, IMAGE_PROFILES, notBuilt, VIDEO_PROFILES, type JobKind, type VideoAudioMode, type VideoImageMode } from '../catalog';
import { BadInputError, NotFoundError, QueueFullError } from '../common/errors';
import { SETTINGS, Settings } from '../config/settings';
import { LOGGER } from '../http/tokens';
import { OutboundClient } from '../net/outbound';
import { Outcome, Scheduler, type LivePreview } from '../scheduler/scheduler';
import type { ServedSummary, WorkerTask } from '../worker/protocol';
import { CallbackSender } from './callback.sender';
import type { InputFile } from './input-probe';
import { newJobId } from './job-id';
import { JobRecord, round3, shownProgress, toJobObject, type ImageJobRecord, type VideoJobRecord } from './job.model';
import { JobStore } from './job.store';
import { KilnMetrics } from '../metrics/metrics';
import { JobEvents } from './job.events';
import { JobFiles } from './job.files';
import { JobWaiters } from './job.waiters';

export const OUTPUT_EXT = { video: '.mp4', image: '.png' } as const;

const profilesOf = (kind: JobKind): string[] => (kind === 'video' ? VIDEO_PROFILES : IMAGE_PROFILES).map((p) => p.profile);

/** Job lifecycle: create (inputs saved, record stored, task queued), live view, wait, delete, restart recovery.
 * Scheduler events drive every transition; the store is written at each transition, not at each step. */
@Injectable()
export class JobsService implements OnModuleInit, OnApplicationShutdown {
  readonly outDir: string;
  readonly inputsDir: string;
  private readonly previews = new Map<string, LivePreview>();

  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    @Inject(LOGGER) private readonly log: Logger,
    private readonly store: JobStore,
    private readonly scheduler: Scheduler,
    private readonly waiters: JobWaiters,
    private readonly callbacks: CallbackSender,
    private readonly outbound: OutboundClient,
    private readonly events: JobEvents,
    private readonly metrics: KilnMetrics,
    private readonly files: JobFiles,
  ) {
    this.outDir = files.outDir;
    this.inputsDir = files.inputsDir;
    scheduler.on('started', (task, started, worker) => this.onStarted(task, started, worker));
    scheduler.on('progress', (task) => this.onProgress(task));
    scheduler.on('preview', (task, frame) => this.onPreview(task, frame));
    scheduler.on('requeued', (task) => this.onRequeued(task));
    // A job's end is saved before the next job starts (the scheduler waits for this).
    scheduler.settleWith((task, outcome) => this.tracked(this.onFinished(task, outcome)));
    scheduler.on('cancelled', (task) => this.track(this.onFinished(task, { status: 'failed', code: 'cancelled', error: 'cancelled', started: 0, finished: Date.now() / 1000 })));
  }

  async onModuleInit(): Promise<void> {
    await mkdir(this.outDir, { recursive: true });
    await mkdir(this.inputsDir, { recursive: true });
    // Temp files of writes a crash cut short: nothing is writing yet, so every one of them is stale.
    await removeStaleTemps(this.outDir, 0);
    // Callbacks a previous run left waiting in their back-off go out now.
    this.callbacks.resume();
    // A job that was running when the API stopped: on a worker of another host (QUEUE=redis) it may still run there,
    // or have ended meanwhile; on this API's own worker it cannot resume mid-way. Otherwise it fails, with its callback.
    for (const job of this.store.withStatus('running')) {
      const started = job.started ?? job.created;
      const recovered = await this.scheduler.recover(this.taskFor(job), job.worker, started);
      if (recovered === 'adopted') {
        this.log.info({ id: job.id, worker: job.worker }, 'job still running on its worker: followed again');
        continue;
      }
      if (!recovered) this.log.warn({ id: job.id }, 'job was running at shutdown; marking it failed');
      await this.finish(job, recovered ?? { status: 'failed', code: 'shutdown', error: 'interrupted by restart', started, finished: Date.now() / 1000 });
    }
    // Queued jobs resume in their original order; inputs nothing owns any more (a speech request's reference clip
    // when the process died during it) go.
    const queued = this.store.withStatus('queued');
    const swept = await this.files.sweepInputs(new Set([...queued, ...this.store.withStatus('running')].map((j) => j.id)));
    if (swept) this.log.info({ removed: swept }, 'removed inputs no job owns');
    for (const job of queued) this.scheduler.enqueue(this.taskFor(job), job.priority);
  }

  /** Transitions still being written; shutdown waits for them before the store closes. */
  private readonly writing = new Set<Promise<void>>();

  private track(p: Promise<void>): void {
    void this.tracked(p);
  }

  private tracked(p: Promise<void>): Promise<void> {
    const q = p.catch((err) => this.log.error({ err }, 'job transition failed')).finally(() => this.writing.delete(q));
    this.writing.add(q);
    return q;
  }

  /** Before Nest closes the HTTP server, which waits for every open request: a client blocked in wait=true gets
   * the job as it stands now instead of holding the shutdown for up to MAX_WAIT_S. */
  beforeApplicationShutdown(): void {
    this.waiters.wakeAll();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.scheduler.stop();
    while (this.writing.size) await Promise.all([...this.writing]);
    await this.callbacks.stop();
    this.waiters.wakeAll();
    this.store.close();
  }

  // ---- create -------------------------------------------------------------------------------------------

  /** Admission checks that need no input bytes: the queue cap and the callback URL's form. */
  admit(callbackUrl: string | null | undefined, queued = true): void {
    // a dry run (src/plan/planner.ts) queues nothing: only its callback_url is checked
    if (queued && this.scheduler.queuedCount() >= this.settings.maxQueue) {
      throw new QueueFullError(`the queue is full (${this.scheduler.queuedCount()} jobs waiting); try again when some have finished`);
    }
    if (callbackUrl) this.outbound.checkUrl(callbackUrl, 'callback_url', ['https:', 'http:']);
  }

  /** What the GPU worker says it can run, checked at creation so a job is never accepted only to fail on a known
   * limit: a profile it does not serve, steps outside its range, inputs it cannot take yet are 400s naming why.
   * While no worker has said (none on this host, or it is starting) the job is taken and waits. */
  checkServed(kind: JobKind, profile: string, job: { steps: number; images: number; audios: number; imageMode?: VideoImageMode; audioMode?: VideoAudioMode; ttsText?: boolean }): void {
    const served = this.scheduler.served(kind, profile);
    if (served === undefined) return;
    if (served === null) throw new BadInputError(notBuilt(kind, profile));
    const { steps, images, audios, imageModes, audioModes, ttsText, inputsNote } = served.accepts;
    const note = inputsNote ?? 'not built';
    if (job.steps < steps.min || job.steps > steps.max) throw new BadInputError(`steps: profile ${profile} runs ${steps.min} to ${steps.max} steps (got ${job.steps})`);
    // tts_text and voices first: with audios the image mode may have switched to reference, so name the cause
    if (job.ttsText && ttsText === false) throw new BadInputError(`tts_text: profile ${profile} cannot speak it yet: ${note}${this.whoCan(kind, profile, (a) => a.ttsText !== false)}`);
    // with tts_text the speech is the soundtrack and audios[0] only its voice, whatever audio_mode says; more clips
    // would be voices of the prompt's dialogue (audio_mode voice)
    const ttsVoices = capabilitiesOf('video', profile)?.tts_text.voice_clips;
    if (job.ttsText && ttsVoices !== undefined && job.audios > ttsVoices) throw new BadInputError(`audios: with tts_text, audios[0] is the voice the speech is spoken in and the speech is the soundtrack; more clips would be voices (audio_mode voice), which a job with a soundtrack does not take: ${job.audios} given`);
    const amode = job.ttsText ? undefined : job.audioMode;
    if (job.audios > 0 && amode && audioModes && !audioModes.includes(amode)) {
      throw new BadInputError(`audio_mode ${amode}: profile ${profile} cannot run it yet: ${note}${this.whoCan(kind, profile, (a) => a.audios >= job.audios && (!a.audioModes || a.audioModes.includes(amode)))}`);
    }
    if (job.audios > audios) {
      throw new BadInputError(audios === 0
        ? `audios: profile ${profile} takes none yet: ${note}${this.whoCan(kind, profile, (a) => a.audios >= job.audios)}`
        : `too many audios: ${job.audios} given, profile ${profile} takes at most ${audios}`);
    }
    const mode = job.imageMode;
    if (job.images > 0 && mode && imageModes && !imageModes.includes(mode)) {
      throw new BadInputError(`image_mode ${mode}: profile ${profile} cannot run it yet: ${note}${this.whoCan(kind, profile, (a) => a.images >= job.images && (!a.imageModes || a.imageModes.includes(mode)))}`);
    }
    if (job.images > images) {
      throw new BadInputError(images === 0
        ? `images: profile ${profile} takes none yet: ${note}${this.whoCan(kind, profile, (a) => a.images >= job.images)}`
        : `too many images: ${job.images} given, profile ${profile} takes at most ${images}`);
    }
  }

  /** '; profile x, y can' for the other profiles of `kind` whose worker accepts what `ok` asks, or that none can. */
  private whoCan(kind: JobKind, profile: string, ok: (a: ServedSummary['accepts']) => boolean): string {
    const names = profilesOf(kind).filter((p) => p !== profile && (() => {
      const s = this.scheduler.served(kind, p);
      return !!s && ok(s.accepts);
    })());
    return names.length ? `; profile${names.length > 1 ? 's' : ''} ${names.join(', ')} can` : `; no ${kind} profile can yet`;
  }

  /** Stores a validated job (its id reserved, its inputs, then the record) and queues it. Returns the record and the
   * job object as created (queued, with its position): the scheduler may hand it to a worker at the next tick. */
  async submit(fields: NewJob, images: InputFile[], audios: InputFile[]): Promise<{ job: JobRecord; created: Record<string, unknown> }> {
    // ids are unique within this process (job-id.ts); another process on the same database may have reserved one:
    // the reservation comes before the inputs are saved, so no two creates ever write into one id's folder
    let id = newJobId();
    while (!this.store.reserveId(id)) id = newJobId();
    const inputs = { images: await this.files.saveInputs(id, images, 'image'), audios: await this.files.saveInputs(id, audios, 'audio') };
    const job = { ...fields, id, status: 'queued', created: round3(Date.now() / 1000), inputs } as JobRecord;
    try {
      this.store.insert(job);
    } catch (err) {
      await this.files.removeInputs(id, [...inputs.images, ...inputs.audios]).catch((e: unknown) => this.log.warn({ id, err: String(e) }, 'could not remove the inputs of a job not stored'));
      throw err;
    }
    this.scheduler.enqueue(this.taskFor(job), job.priority);
    const created = this.view(job);
    this.events.publish(id, 'queued', created);
    this.log.info({ id, kind: job.kind, profile: job.profile }, 'job queued');
    return { job, created };
  }

  /** The job as the GPU worker's task: its stored task and its files. */
  private taskFor(job: JobRecord): WorkerTask {
    const files = {
      id: job.id,
      profile: job.profile,
      images: job.inputs.images.map((n) => this.files.inputRef(job.id, n)),
      audios: job.inputs.audios.map((n) => this.files.inputRef(job.id, n)),
      output: this.files.outputRef(job.id, `${job.id}${OUTPUT_EXT[job.kind]}`),
    };
    return job.kind === 'image' ? { ...files, kind: 'image', params: job.task } : { ...files, kind: 'video', params: job.task };
  }

  // ---- read ---------------------------------------------------------------------------------------------

  /** The stored job, or undefined. */
  find(id: string): JobRecord | undefined {
    return this.store.get(id);
  }

  getRecord(id: string): JobRecord {
    const job = this.store.get(id);
    if (job) return job;
    const expired = this.store.expiredAt(id);
    if (expired !== undefined) throw new NotFoundError(expiredText(`job ${id}`, expired, this.settings.outputTtlS));
    throw new NotFoundError(`job ${id} not found`);
  }

  /** Deletes the finished jobs past OUTPUT_TTL_S (record, files, events), remembering when each expired. */
  async expireEnded(nowS = Date.now() / 1000): Promise<number> {
    const cutoff = nowS - this.settings.outputTtlS;
    let n = 0;
    for (let batch = this.store.endedBefore(cutoff); batch.length > 0; batch = this.store.endedBefore(cutoff)) {
      for (const job of batch) {
        this.store.expire(job.id, round3(job.finished! + this.settings.outputTtlS));
        this.events.deleted(job.id);
        await this.removeFiles(job);
        n++;
      }
    }
    if (n) this.log.info({ count: n, ttl_s: this.settings.outputTtlS }, 'expired jobs deleted (OUTPUT_TTL_S)');
    return n;
  }

  view(job: JobRecord): Record<string, unknown> {
    // the job's own live state: with many workers, several jobs run at once
    const cur = job.status === 'running' ? this.scheduler.running(job.id) : undefined;
    const running = cur ? { stage: cur.stage, progress: cur.progress, started: cur.started } : undefined;
    const o = toJobObject(job, { position: this.scheduler.position(job.id), running, eta_s: this.scheduler.etaS(job.id) });
    // with OUTPUT_TTL_S, a finished job says when it goes (an extension)
    if (this.settings.outputTtlS > 0 && job.finished !== undefined && (job.status === 'done' || job.status === 'failed')) o.expires_at = round3(job.finished + this.settings.outputTtlS);
    return o;
  }

  get(id: string): Record<string, unknown> {
    return this.view(this.getRecord(id));
  }

  list(opts: { kind?: string; status?: string; limit: number; offset: number }): { total: number; jobs: Record<string, unknown>[] } {
    const { total, jobs } = this.store.list(opts);
    return { total, jobs: jobs.map((j) => this.view(j)) };
  }

  /** Resolves when the job is done/failed, the timeout passes, or the client goes away. Event-driven. */
  async waitFor(id: string, timeoutS: number, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const job = this.getRecord(id);
    if (job.status === 'queued' || job.status === 'running') await this.waiters.wait(id, timeoutS * 1000, signal);
    return this.get(id);
  }

  /** The finished file of a job, for the download endpoints. */
  async outputFile(id: string, kind: 'video' | 'image'): Promise<{ body: Readable; name: string; type: string }> {
    const job = this.getRecord(id);
    if (job.kind !== kind) throw new NotFoundError(`job ${id} is an ${job.kind} job; it has no ${kind}`);
    if (job.status !== 'done' || !job.output) throw new NotFoundError(`job ${id} has no ${kind} yet (status ${job.status})`);
    const file = await this.files.open(job.output);
    if (!file || 'unsatisfiable' in file) throw new NotFoundError(`job ${id}: its ${kind} file is gone from the ${this.files.remote ? 'object store' : 'output folder'}`);
    return { body: file.body, name: job.output, type: file.type };
  }

  // ---- delete -------------------------------------------------------------------------------------------

  /** queued -> cancelled, running -> interrupted (stops at the pipeline's next check), done/failed -> deleted. */
  async remove(id: string): Promise<{ id: string; action: 'cancelled' | 'interrupted' | 'deleted' }> {
    const job = this.getRecord(id);
    if (job.status === 'queued' || job.status === 'running') {
      const action = this.scheduler.cancel(id);
      // A cancelled job is written as failed before the answer, so a GET right after sees it ended.
      if (action === 'cancelled') while (this.writing.size) await Promise.all([...this.writing]);
      if (action) return { id, action };
    }
    this.store.delete(id);
    this.events.deleted(id);
    await this.removeFiles(job);
    this.waiters.wake(id);
    this.log.info({ id }, 'job deleted');
    return { id, action: 'deleted' };
  }

  // ---- transitions --------------------------------------------------------------------------------------

  private onStarted(task: WorkerTask, started: number, worker: string): void {
    const job = this.store.get(task.id);
    if (!job) return;
    job.status = 'running';
    job.started = round3(started);
    job.worker = worker;
    this.store.update(job);
    this.log.info({ id: job.id }, 'job started');
    this.metrics.jobStarted(job.kind, job.profile, started - job.created);
    this.lastStage.delete(job.id);
    this.events.publish(job.id, 'running', this.view(job));
    this.events.moved();
  }

  /** The stage each running job reported last: a change is a `stage` event, anything else a `progress` one. */
  private readonly lastStage = new Map<string, string>();

  /** A job sent to a worker that was lost before it began the job: queued again, for another worker. */
  private onRequeued(task: WorkerTask): void {
    const job = this.store.get(task.id);
    if (!job || job.status !== 'running') return;
    job.status = 'queued';
    delete job.started;
    delete job.worker;
    this.store.update(job);
    this.lastStage.delete(job.id);
    this.log.info({ id: job.id }, 'job queued again: its worker was lost before it began');
    this.events.publish(job.id, 'queued', this.view(job));
    this.events.moved();
  }

  private onProgress(task: WorkerTask): void {
    const cur = this.scheduler.running(task.id);
    if (!cur || task.kind === 'tts') return; // a speech request: no job, no events
    const delta = { id: task.id, status: 'running', stage: cur.stage, progress: shownProgress(cur.progress, task.params.steps), elapsed: round3(Date.now() / 1000 - cur.started), eta_s: this.scheduler.etaS(task.id) };
    const type = this.lastStage.get(task.id) === cur.stage ? 'progress' : 'stage';
    this.lastStage.set(task.id, cur.stage);
    this.events.publish(task.id, type, delta);
  }

  /** Keeps a running job's latest preview (in memory: one small webp per running job, dropped when it ends) and
   * tells its event stream, with the URL to fetch it rather than the picture. */
  private onPreview(task: WorkerTask, frame: LivePreview): void {
    if (task.kind === 'tts' || !this.scheduler.running(task.id)) return;
    this.previews.set(task.id, frame);
    this.events.publish(task.id, 'preview', { id: task.id, step: frame.step, max: frame.max, width: frame.width, height: frame.height, url: `/api/jobs/${task.id}/preview` });
  }

  /** A job's latest live preview; 404 for an unknown job, or one without a preview now (not sampling yet, ended, or
   * previews off). */
  latestPreview(id: string): LivePreview {
    const job = this.getRecord(id);
    const p = this.previews.get(id);
    if (!p) {
      const why = job.status === 'running' ? 'a preview comes every few sampling steps (PREVIEWS=off turns them off)' : `previews are shown while a job samples; this one is ${job.status}`;
      throw new NotFoundError(`job ${id} has no preview now: ${why}`);
    }
    return p;
  }

  private async onFinished(task: WorkerTask, outcome: Outcome): Promise<void> {
    this.previews.delete(task.id);
    const job = this.store.get(task.id);
    if (job) await this.finish(job, outcome);
  }

  /** Saves the end first (the worker checked the output file is there), then cleans up and tells. */
  private async finish(job: JobRecord, result: Outcome): Promise<void> {
    const name = `${job.id}${OUTPUT_EXT[job.kind]}`;
    job.finished = round3(result.finished);
    if (result.status === 'done') {
      job.status = 'done';
      job.output = name;
      job.exec_s = round3(result.exec_s);
    } else {
      job.status = 'failed';
      job.error = result.code === 'shutdown' ? 'interrupted by restart' : result.error;
    }
    this.store.update(job);
    this.metrics.jobEnded(job.kind, job.profile, job.status, job.exec_s);
    this.lastStage.delete(job.id);
    this.events.publish(job.id, job.status, this.view(job));
    this.events.moved();
    if (result.status === 'failed') await this.files.removeOutput(name);
    await this.files.clearInputs(job.id);
    this.log.info({ id: job.id, status: job.status, error: job.error }, 'job ended');
    this.waiters.wake(job.id);
    if (job.callback_url) this.callbacks.send(job, this.view(job));
  }

  private async removeFiles(job: JobRecord): Promise<void> {
    await this.files.remove(job.id, `${job.id}${OUTPUT_EXT[job.kind]}`);
  }

  /** For /api/status and /api/health. */
  summary(): { current: string | null; queued: number } {
    return { current: this.scheduler.current()?.task.id ?? null, queued: this.scheduler.queuedCount() };
  }
}

type Unsaved<R> = R extends unknown ? Omit<R, 'id' | 'status' | 'created' | 'inputs'> : never;
/** A drafted job before it is stored: its id, status, creation time and saved input names are submit's. */
export type NewJob = Unsaved<VideoJobRecord> | Unsaved<ImageJobRecord>;

/** "job X expired at 2026-11-24T10:00:00.000Z and was deleted (OUTPUT_TTL_S=3600)" */
export function expiredText(what: string, at: number, ttlS: number): string {
  return `${what} expired at ${new Date(at * 1000).toISOString()} and was deleted (OUTPUT_TTL_S=${ttlS})`;
}
