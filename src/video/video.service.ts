import { Injectable } from '@nestjs/common';
import { capabilitiesOf, keyframeProblem, VIDEO_DEFAULTS, videoReferenceProblem } from '../catalog';
import { BadInputError } from '../common/errors';
import { checkTimeout } from '../jobs/job-requests';
import { draftVideo, type VideoRequest } from './video.draft';
import { InputFile } from '../jobs/input-probe';
import { JobInputs } from '../jobs/job.inputs';
import { JobsService } from '../jobs/jobs.service';
import { LoraLibrary } from '../loras/lora-library';
import { VoiceStore } from '../tts/voices.store';
import { Planner } from '../plan/planner';
import type { PlanRequest } from '../plan/plan';
import { FitCheck } from '../jobs/fit-check';

type VideoInputs = { images: number; audios: number; load: () => Promise<[InputFile[], InputFile[]]> };

/** Video job creation: the spec's rules, then inputs checked (images decodable and <= 25 MB, clips 2 to 15 s). */
@Injectable()
export class VideoService {
  constructor(private readonly jobs: JobsService, private readonly inputs: JobInputs, private readonly voices: VoiceStore, private readonly planner: Planner, private readonly fit: FitCheck, private readonly loras: LoraLibrary) {}

  /** The JSON form: its images and audios are URLs or data URIs, fetched once the checks that need no bytes passed. */
  createFromRefs(req: VideoRequest & { images?: string[]; audios?: string[]; callback_url?: string | null; wait?: boolean; dry_run?: boolean }, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const images = req.images ?? [];
    const audios = req.audios ?? [];
    const load = () => Promise.all([this.inputs.fetchAll(images, 'images', 'image'), this.inputs.fetchAll(audios, 'audios', 'audio')]);
    return this.create(req, { images: images.length, audios: audios.length, load }, signal);
  }

  async create(
    req: VideoRequest & { callback_url?: string | null; wait?: boolean; dry_run?: boolean },
    given: VideoInputs,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const { req: r, inputs } = this.withSavedVoice(req, given);
    req = r;
    const d = draftVideo(req, inputs.images, inputs.audios);
    if (req.voice?.trim() && d.tts_text.trim() === '') {
      throw new BadInputError(`voice: a saved voice stands for audios[0] only as the voice the speech model speaks in, and this job has no speech: give tts_text (or, with no pictures and audio_mode voice, quote the dialogue in the prompt); a clip for audio_mode ${d.audio_mode} goes in audios`);
    }
    this.jobs.checkServed('video', d.profile.profile, { steps: d.steps, images: inputs.images, audios: inputs.audios, imageMode: d.image_mode, audioMode: d.audio_mode, ttsText: d.tts_text.trim() !== '' });
    // the LoRA files found and matched to the profile's model before anything is fetched or queued (docs/loras.md)
    const loras = await this.loras.resolve(d.profile.profile, d.loras, 'video');
    const timeout = checkTimeout(req.timeout, VIDEO_DEFAULTS.timeout);
    this.jobs.admit(req.callback_url, !req.dry_run);
    const [images, audios] = await inputs.load();
    const probed = await this.inputs.probeImages(images);
    if (d.image_mode === 'reference') {
      // a reference keeps its own aspect (upstream takes 1:4 to 4:1)
      probed.forEach((p, i) => {
        const problem = videoReferenceProblem(images[i]!.label, p.width, p.height);
        if (problem) throw new BadInputError(problem);
      });
    }
    if (d.image_mode === 'keyframe') {
      // the cover scale before the crop is bounded (a sliver of a picture would be scaled to hundreds of megapixels)
      probed.forEach((p, i) => {
        const problem = keyframeProblem(images[i]!.label, d.width, d.height, p.width, p.height);
        if (problem) throw new BadInputError(problem);
      });
    }
    // the clip lengths of the profile's capability table entry
    const caps = capabilitiesOf('video', d.profile.profile)!;
    const clip = caps.audios.clip_seconds;
    const seconds = await this.inputs.checkAudioLengths(audios, clip);
    // tts_text clones audios[0]'s voice with the speech model, which takes clips of 3 s and more (as POST /api/v1/tts)
    const voiceMin = caps.tts_text.voice_min_s;
    if (d.tts_text.trim() !== '' && seconds[0]! < voiceMin) {
      const what = d.voice_alone ? 'the voice that speaks the prompt\'s dialogue (no pictures: the speech model speaks it)' : 'the voice for tts_text';
      throw new BadInputError(`audios[0]: ${what} is ${seconds[0]!.toFixed(2)} s long; a voice clip must be ${voiceMin} to ${clip.maxS} s`);
    }
    // voices (audio_mode voice) are MiniMax H3 references: 2 to 15 s each (above) and 15 s together
    const total = seconds.reduce((s, x) => s + x, 0);
    const together = caps.audios.modes.voice.total_s;
    if (d.audio_mode === 'voice' && d.tts_text.trim() === '' && total > together.maxS + together.toleranceS) {
      throw new BadInputError(`audios: the voices are ${seconds.map((s) => s.toFixed(2)).join(' + ')} = ${total.toFixed(2)} s long; together they may be at most ${together.maxS} s: shorten or drop one`);
    }
    // the job as a plan sees it: the pictures' sizes and the clips' lengths (their contents do not change a plan)
    const planned: PlanRequest = {
      kind: 'video', prompt: req.prompt, profile: d.profile.profile, aspect: req.aspect, res: req.res, seconds: req.seconds, steps: req.steps,
      image_mode: req.image_mode, audio_mode: req.audio_mode, tts_text: req.tts_text, tts_ref_text: req.tts_ref_text, tts_language: req.tts_language,
      images: probed.map((p) => ({ width: p.width, height: p.height })), audios: seconds,
    };
    // dry_run: the plan of the job this request would make, checked above as a create is; nothing queued or stored
    if (req.dry_run) {
      const plan = await this.planner.plan(planned, signal);
      if (loras.length) plan.notes.push('the plan leaves the LoRAs out: their low-rank pairs (held on the GPU beside their layers) and the work they add are not counted');
      return plan as unknown as Record<string, unknown>;
    }
    // a job that cannot fit the GPU even with offload is refused now, not failed once it ran out of memory
    await this.fit.check('video', d.profile.profile, planned, signal);
    const { job, created } = await this.jobs.submit(
      {
        kind: 'video', profile: d.profile.profile, aspect: d.aspect, res: d.res, size: `${d.width}x${d.height}`, seconds: d.seconds,
        callback_url: req.callback_url ?? null, priority: d.priority,
        task: {
          prompt: d.prompt, seed: d.seed, steps: d.steps, width: d.width, height: d.height, frames: d.frames, mode: d.mode,
          image_mode: d.image_mode, audio_mode: d.audio_mode, tts_text: d.tts_text, tts_ref_text: d.tts_ref_text, tts_language: d.tts_language,
          ...(loras.length ? { loras } : {}),
        },
      },
      images,
      audios,
    );
    // the spec: creating returns the job as created (queued, with its position), whatever the scheduler does next
    return req.wait ? this.jobs.waitFor(job.id, timeout, signal) : created;
  }

  /** `voice` (an extension) in place of audios[0]: the saved voice's clip becomes the job's one clip, as an upload
   * would (the same checks and files follow), and its transcript the tts_ref_text when the request gives none. */
  private withSavedVoice<R extends VideoRequest>(req: R, given: VideoInputs): { req: R; inputs: VideoInputs } {
    const key = req.voice?.trim();
    if (!key) return { req, inputs: given };
    if (given.audios > 0) throw new BadInputError(`give voice or audios, not both: voice names a saved voice whose clip is audios[0] (${given.audios} clip${given.audios > 1 ? 's' : ''} given)`);
    const v = this.voices.named(key);
    const clip = this.voices.clip(v);
    return {
      req: { ...req, tts_ref_text: req.tts_ref_text?.trim() ? req.tts_ref_text : (v.ref_text ?? req.tts_ref_text) },
      inputs: { images: given.images, audios: 1, load: async () => [(await given.load())[0], [clip]] },
    };
  }
}
