import { Inject, Injectable } from '@nestjs/common';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statfsSync } from 'node:fs';
import { cpus, freemem, loadavg, totalmem, uptime } from 'node:os';
import { join } from 'node:path';
import { SETTINGS, Settings } from '../config/settings';
import {
  CLIP_SECONDS, EXPLICIT_SIZE, FPS, IMAGE_ASPECTS, IMAGE_DEFAULTS, IMAGE_PROFILES, IMAGE_RES, IMAGE_SIZES, MAX_CFG, MAX_INPUT_BYTES, MAX_PROMPT_CHARS, MAX_STEPS,
  LORA_LIMITS, MAX_WAIT_S, ProfileInfo, TTS_DEFAULTS, TTS_LANGUAGES, TTS_MODEL, TTS_PROFILE, VIDEO_ASPECTS, VIDEO_AUDIO_MODES, VIDEO_DEFAULTS, VIDEO_IMAGE_MODES,
  VIDEO_MAX_AUDIOS, VIDEO_MAX_IMAGES, VIDEO_PROFILES, VIDEO_RES, VIDEO_SECONDS, VIDEO_SIZES, snapFrames,
} from '../catalog';
import { JobsService } from '../jobs/jobs.service';
import { JobWaiters } from '../jobs/job.waiters';
import { LoraLibrary } from '../loras/lora-library';
import { projectRoot } from '../paths';
import { Scheduler } from '../scheduler/scheduler';
import { GpuProbe } from './gpu.probe';

const started = Date.now() / 1000;

/** /api/status, /api/config and /api/health bodies (their fields are ours to choose: README "API"). */
@Injectable()
export class HealthService {
  private readonly revision = sourceRevision();

  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly jobs: JobsService,
    private readonly scheduler: Scheduler,
    private readonly gpu: GpuProbe,
    private readonly waiters: JobWaiters,
    private readonly loras: LoraLibrary,
  ) {}

  status() {
    const { current, queued } = this.jobs.summary();
    const base = { online: true, current_job: current, queued };
    // many hosts (QUEUE=redis): every worker and what it runs (an extension)
    if (this.settings.cluster.queue !== 'redis') return base;
    return { ...base, workers: this.scheduler.workers().map((w) => ({ name: w.name, host: w.host, state: w.state, profiles: w.profiles, loaded: w.loaded, current_job: w.current_job, heartbeat_age_s: w.heartbeat_age_s })) };
  }

  /** A catalog profile with what the GPU worker says of it (its last report, kept while it restarts). */
  private profile(p: ProfileInfo | { profile: string; kind: 'tts' }) {
    const served = this.scheduler.profiles().find((s) => s.kind === p.kind && s.profile === p.profile);
    if (served) return { ...p, available: true, weights: served.weights, note: served.note, ...(served.suggested && { suggested: served.suggested }) };
    const model = 'model' in p ? p.model : TTS_MODEL;
    const note = !this.scheduler.hasWorker()
      ? `no GPU worker on this host (WORKERS=none): ${p.kind === 'tts' ? 'speech requests answer 503' : 'its jobs wait in the queue'}`
      : this.scheduler.serves(p.kind, p.profile) === undefined
        ? 'the GPU worker is starting'
        : `the ${model} model behind ${p.profile} is not built into this service yet; its jobs fail with that reason`;
    return { ...p, available: false, weights: 'missing', note };
  }

  async config() {
    return {
      version: '1.1',
      profiles: [...VIDEO_PROFILES, ...IMAGE_PROFILES].map((p) => this.profile(p)),
      // each kind's request defaults (the capability table's, catalog/capabilities.ts): the page's forms start from them
      tts: { ...this.profile({ profile: TTS_PROFILE, kind: 'tts' }), languages: TTS_LANGUAGES, ref_audio_seconds: { min: CLIP_SECONDS.speech.minS, max: CLIP_SECONDS.speech.maxS }, defaults: TTS_DEFAULTS },
      video: {
        aspects: VIDEO_ASPECTS,
        res: VIDEO_RES,
        sizes: VIDEO_SIZES,
        fps: FPS,
        seconds: { min: VIDEO_SECONDS.min, max: VIDEO_SECONDS.max, default: VIDEO_SECONDS.default, options: VIDEO_SECONDS.options.map((s) => ({ seconds: s, frames: snapFrames(s) })) },
        image_modes: VIDEO_IMAGE_MODES,
        audio_modes: VIDEO_AUDIO_MODES,
        max_images: VIDEO_MAX_IMAGES,
        max_audios: VIDEO_MAX_AUDIOS,
        audio_seconds: { min: CLIP_SECONDS.video.minS, max: CLIP_SECONDS.video.maxS },
        tts_languages: TTS_LANGUAGES,
        // what a request's `loras` may hold (the capability table's; docs/loras.md)
        lora_limits: LORA_LIMITS,
        defaults: VIDEO_DEFAULTS,
      },
      image: {
        aspects: IMAGE_ASPECTS,
        res: IMAGE_RES,
        sizes: IMAGE_SIZES,
        explicit_size: EXPLICIT_SIZE,
        max_images: Object.fromEntries(IMAGE_PROFILES.map((p) => [p.profile, p.max_images])),
        max_cfg: MAX_CFG,
        // what a request's `loras` may hold (the capability table's; docs/loras.md)
        lora_limits: LORA_LIMITS,
        defaults: IMAGE_DEFAULTS,
      },
      // the LoRA files a request's `loras` may name (LORA_DIR, ComfyUI's loras/), each with the image and video profiles whose
      // model it fits (an extension, docs/loras.md)
      loras: await this.loras.listing(),
      limits: { image_bytes: MAX_INPUT_BYTES, prompt_chars: MAX_PROMPT_CHARS, max_steps: MAX_STEPS, wait_timeout_s: MAX_WAIT_S, max_queue: this.settings.maxQueue },
    };
  }

  async health() {
    const disk = (() => {
      try {
        const s = statfsSync(this.settings.dataDir);
        return { path: this.settings.dataDir, total_bytes: s.blocks * s.bsize, free_bytes: s.bavail * s.bsize };
      } catch (err) {
        return { path: this.settings.dataDir, error: String(err) };
      }
    })();
    const worker = this.scheduler.worker();
    const cur = this.scheduler.current();
    const workerOk = this.scheduler.workers().some((w) => w.state === 'ready');
    return {
      ok: workerOk,
      gpu: await this.gpu.describe(),
      cpu: { model: cpus()[0]?.model ?? 'unknown', cores: cpus().length, loadavg: loadavg() },
      ram: { total_bytes: totalmem(), free_bytes: freemem(), process_rss_bytes: process.memoryUsage().rss },
      disk,
      services: {
        api: 'ok',
        scheduler: 'ok',
        worker: worker ? (workerOk ? 'ok' : worker.state) : 'none',
        database: 'ok',
        waiters: this.waiters.count(),
        ...(this.scheduler.poolHealth() ?? {}),
      },
      worker: worker ?? { mode: 'none', note: 'WORKERS=none: this API starts no GPU worker; jobs wait in the queue' },
      // every GPU worker (one host: the one above), with the job it runs
      workers: this.scheduler.workers(),
      current_job: cur ? { id: cur.task.id, kind: cur.task.kind, profile: cur.task.profile, stage: cur.stage, progress: cur.progress, elapsed: Date.now() / 1000 - cur.started } : null,
      queued: this.scheduler.queuedCount(),
      vpn: null,
      vpn_note: 'VPN status is outside this service; it is always null here',
      source_revision: this.revision,
      uptime_s: { process: Math.round(Date.now() / 1000 - started), machine: Math.round(uptime()) },
      // the GPU worker's heartbeat (the API's own loop is alive: it answered)
      watchdog: worker
        ? { age_s: worker.heartbeat_age_s, stalled_after_s: worker.stalled_after_s, busy_stalled_after_s: worker.busy_stalled_after_s, interrupt_grace_s: this.settings.interruptGraceS, max_job_s: this.settings.maxJobS }
        : { age_s: null, note: 'no GPU worker to watch (WORKERS=none)' },
    };
  }
}

/** KILN_REVISION (set at image build), else the REVISION file, else `git rev-parse HEAD`, else null. */
function sourceRevision(): string | null {
  if (process.env.KILN_REVISION) return process.env.KILN_REVISION;
  try {
    const root = projectRoot();
    const file = join(root, 'REVISION');
    if (existsSync(file)) return readFileSync(file, 'utf8').trim();
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 }).toString().trim();
  } catch {
    return null;
  }
}
