// OpenAI's videos (/v1/videos) as Kiln video jobs: a create goes through VideoService.create (drafting, the
// capability table, the queue), so every video is a job /api/jobs and the page show, and the video object is read
// off the job object. OpenAI's video is asynchronous as Kiln's jobs are: the SDK polls retrieve until completed.
import { Injectable } from '@nestjs/common';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { VIDEO_SIZES } from '../catalog';
import { BadInputError, NotFoundError, UnavailableError } from '../common/errors';
import type { InputFile } from '../jobs/input-probe';
import { JobInputs } from '../jobs/job.inputs';
import { JobsService } from '../jobs/jobs.service';
import { BASE_ARGS, runFfmpeg } from '../media/ffmpeg';
import { VideoService } from '../video/video.service';
import { videoProfileOf } from './models';
import { RemixStore } from './remixes.store';
import type { OpenAiVideoCreateDto, OpenAiVideoListQuery, VIDEO_VARIANTS } from './videos.dto';

type Job = Record<string, unknown>;

/** OpenAI's sizes, each run at Kiln's size of the same aspect at 768p (the video object says the size made). */
export const OPENAI_VIDEO_SIZES: Record<string, { aspect: string; res: string }> = {
  '1280x720': { aspect: '16:9', res: '768p' },
  '720x1280': { aspect: '9:16', res: '768p' },
  '1792x1024': { aspect: '16:9', res: '768p' },
  '1024x1792': { aspect: '9:16', res: '768p' },
};

const STATUS: Record<string, 'queued' | 'in_progress' | 'completed' | 'failed'> = { queued: 'queued', running: 'in_progress', done: 'completed', failed: 'failed' };

/** A size as `aspect` and `res` for drafting: one of Kiln's video sizes, or one of OpenAI's. */
export function videoSizeOf(size: string | undefined): { aspect?: string; res?: string } {
  if (size === undefined) return {};
  for (const [aspect, byRes] of Object.entries(VIDEO_SIZES)) {
    for (const [res, [w, h]] of Object.entries(byRes)) if (size === `${w}x${h}`) return { aspect, res };
  }
  const openAi = OPENAI_VIDEO_SIZES[size];
  if (openAi) return openAi;
  const kiln = Object.values(VIDEO_SIZES).flatMap((r) => Object.values(r).map(([w, h]) => `${w}x${h}`));
  throw new BadInputError(`size ${JSON.stringify(size)}: use one of Kiln's video sizes (${kiln.join(', ')}) or OpenAI's (${Object.keys(OPENAI_VIDEO_SIZES).join(', ')}, made at 768p)`);
}

/** OpenAI's `seconds` (a string of whole seconds) as a number; drafting checks the range. */
export function videoSecondsOf(seconds: string | undefined): number | undefined {
  if (seconds === undefined) return undefined;
  if (!/^\s*\d+\s*$/.test(seconds)) throw new BadInputError(`seconds ${JSON.stringify(seconds)}: whole seconds as a string, like "4"`);
  return Number(seconds);
}

@Injectable()
export class OpenAiVideosService {
  constructor(private readonly video: VideoService, private readonly jobs: JobsService, private readonly inputs: JobInputs, private readonly remixes: RemixStore) {}

  /** The video object of job `job` (a Kiln job object). */
  videoObject(job: Job): Record<string, unknown> {
    const status = STATUS[String(job.status)] ?? 'failed';
    const p = job.progress as { value: number; max: number } | undefined;
    const progress = status === 'completed' ? 100 : status === 'in_progress' && p && p.max > 0 ? Math.min(99, Math.floor((100 * p.value) / p.max)) : 0;
    const error = status === 'failed' ? { code: /cancel/i.test(String(job.error)) ? 'cancelled' : 'generation_failed', message: String(job.error ?? 'failed') } : null;
    const whole = (x: unknown) => (typeof x === 'number' ? Math.floor(x) : null);
    return {
      id: job.id, object: 'video', created_at: whole(job.created), completed_at: status === 'completed' ? whole(job.finished) : null,
      expires_at: whole(job.expires_at), error, model: job.profile, progress, prompt: job.prompt,
      remixed_from_video_id: this.remixes.sourceOf(String(job.id)), seconds: String(job.seconds), size: job.size, status,
    };
  }

  async create(dto: OpenAiVideoCreateDto, picture: InputFile | undefined): Promise<Record<string, unknown>> {
    const profile = videoProfileOf(dto.model);
    const ref = dto.input_reference;
    if (picture && ref) throw new BadInputError('input_reference: send the picture either as a file part or as {"image_url"}, not both');
    if (ref && ref.file_id !== undefined) throw new BadInputError('input_reference.file_id: Kiln has no files API; send the picture as the input_reference file part, or {"image_url": "https://..."}');
    if (ref && typeof ref.image_url !== 'string') throw new BadInputError('input_reference: give {"image_url": "https://..."} or send the picture as a file part');
    const url = ref?.image_url;
    const job = await this.video.create(
      { prompt: dto.prompt, profile, ...videoSizeOf(dto.size), seconds: videoSecondsOf(dto.seconds), seed: dto.seed, steps: dto.steps, loras: dto.loras },
      {
        images: picture || url ? 1 : 0,
        audios: 0,
        load: async () => [picture ? [{ ...picture, label: `input_reference (${picture.name ?? 'file'})` }] : url ? [await this.inputs.fetchOne(url, 'input_reference', 'image')] : [], []],
      },
    );
    return this.videoObject(job);
  }

  retrieve(id: string): Record<string, unknown> {
    return this.videoObject(this.videoJob(id));
  }

  /** Video jobs by creation, a cursor page at a time (OpenAI's: `after` an id, `has_more`, `first_id`/`last_id`). */
  list(q: OpenAiVideoListQuery): Record<string, unknown> {
    const all = this.jobs.list({ kind: 'video', limit: Number.MAX_SAFE_INTEGER, offset: 0 }).jobs; // newest first
    if (q.order === 'asc') all.reverse();
    let start = 0;
    if (q.after !== undefined) {
      const i = all.findIndex((j) => j.id === q.after);
      if (i < 0) throw new BadInputError(`after: no video ${JSON.stringify(q.after)} (deleted, or never made); start again without after`);
      start = i + 1;
    }
    const page = all.slice(start, start + (q.limit ?? 20)).map((j) => this.videoObject(j));
    const id = (v: Record<string, unknown> | undefined) => (v ? String(v.id) : null);
    return { object: 'list', data: page, first_id: id(page[0]), last_id: id(page.at(-1)), has_more: start + page.length < all.length };
  }

  /** Deletes the video and its files; a queued or running one is cancelled first (it ends within a second). */
  async remove(id: string): Promise<Record<string, unknown>> {
    this.videoJob(id);
    let { action } = await this.jobs.remove(id);
    if (action !== 'deleted') {
      await this.jobs.waitFor(id, 10);
      ({ action } = await this.jobs.remove(id));
    }
    return { id, deleted: action === 'deleted', object: 'video.deleted' };
  }

  /** A new video from `id`'s settings and seed with another prompt. A video made from inputs cannot be remade:
   * Kiln keeps a job's inputs only until it has run. */
  async remix(id: string, prompt: string): Promise<Record<string, unknown>> {
    const src = this.videoJob(id);
    const record = this.jobs.getRecord(id);
    if (record.kind !== 'video') throw new NotFoundError(`no video ${JSON.stringify(id)}: job ${id} is an ${record.kind} job`);
    if (record.inputs.images.length > 0 || record.inputs.audios.length > 0) {
      throw new BadInputError(`video ${id} was made from pictures or clips, which Kiln keeps only until a job has run; create a new video with them and the new prompt`);
    }
    const p = record.task;
    const job = await this.video.create(
      {
        prompt, profile: String(src.profile), aspect: String(src.aspect), res: String(src.res), seconds: src.seconds as number, seed: src.seed as number,
        steps: src.steps as number, image_mode: p.image_mode, audio_mode: p.audio_mode, tts_text: p.tts_text, tts_ref_text: p.tts_ref_text, tts_language: p.tts_language,
        // the same LoRAs at the same scales: a remix changes the prompt only
        ...(p.loras?.length ? { loras: p.loras.map(({ name, scale }) => ({ name, scale })) } : {}),
      },
      { images: 0, audios: 0, load: async () => [[], []] },
    );
    this.remixes.add(String(job.id), id);
    return this.videoObject(job);
  }

  /** The mp4, or a picture made from it by ffmpeg: the first frame (webp), or up to 8 frames in a 4 x 2 grid (jpeg). */
  async content(id: string, variant: (typeof VIDEO_VARIANTS)[number] = 'video', signal?: AbortSignal): Promise<{ body: Readable | Buffer; type: string }> {
    const job = this.videoJob(id);
    const file = await this.jobs.outputFile(id, 'video');
    if (variant === 'video') return { body: file.body, type: 'video/mp4' };
    const dir = await mkdtemp(join(tmpdir(), 'kiln-video-'));
    try {
      const mp4 = join(dir, 'video.mp4');
      await pipeline(file.body, createWriteStream(mp4));
      const every = Math.max(1, Math.ceil(Number(job.frames) / 8));
      const [out, args, type] = variant === 'thumbnail'
        ? [join(dir, 'thumbnail.webp'), ['-frames:v', '1', '-c:v', 'libwebp', '-quality', '85'], 'image/webp']
        : [join(dir, 'spritesheet.jpg'), ['-vf', `select=not(mod(n\\,${every})),scale=256:-2,tile=4x2`, '-fps_mode', 'vfr', '-frames:v', '1', '-q:v', '4'], 'image/jpeg'];
      const exit = await runFfmpeg([...BASE_ARGS, '-loglevel', 'error', '-i', mp4, ...args, out], { timeoutMs: 60_000, signal });
      if (exit.code !== 0) throw new UnavailableError(`making the ${variant} of video ${id} failed: ${exit.stderr}`);
      return { body: await readFile(out), type };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private videoJob(id: string): Job {
    const job = this.jobs.find(id);
    if (!job || job.kind !== 'video') {
      if (job) throw new NotFoundError(`no video ${JSON.stringify(id)}: job ${id} is an ${job.kind} job`);
      let why = '';
      try {
        this.jobs.getRecord(id);
      } catch (e) {
        if (!/ not found$/.test((e as Error).message)) why = `: ${(e as Error).message}`; // say so when it expired
      }
      throw new NotFoundError(`no video ${JSON.stringify(id)}${why}`);
    }
    return this.jobs.view(job);
  }
}
