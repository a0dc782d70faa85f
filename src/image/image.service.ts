import { Injectable } from '@nestjs/common';
import { aspectOf, IMAGE_DEFAULTS, referenceProblem, sizeForTier } from '../catalog';
import { BadInputError } from '../common/errors';
import { checkTimeout } from '../jobs/job-requests';
import { draftImage, type ImageRequest } from './image.draft';
import { InputFile } from '../jobs/input-probe';
import { JobInputs } from '../jobs/job.inputs';
import { JobsService } from '../jobs/jobs.service';
import { LoraLibrary } from '../loras/lora-library';
import { Planner } from '../plan/planner';
import type { PlanRequest } from '../plan/plan';
import { FitCheck } from '../jobs/fit-check';

/** Image job creation: the spec's rules (profiles, tiers, explicit size, size_from_ref), inputs checked. */
@Injectable()
export class ImageService {
  constructor(private readonly jobs: JobsService, private readonly inputs: JobInputs, private readonly loras: LoraLibrary, private readonly planner: Planner, private readonly fit: FitCheck) {}

  /** The JSON form: its images are URLs or data URIs, fetched once the checks that need no bytes passed. */
  createFromRefs(req: ImageRequest & { images?: string[]; callback_url?: string | null; wait?: boolean; dry_run?: boolean }, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const images = req.images ?? [];
    return this.create(req, { images: images.length, load: () => this.inputs.fetchAll(images, 'images', 'image') }, signal);
  }

  async create(
    req: ImageRequest & { callback_url?: string | null; wait?: boolean; dry_run?: boolean },
    inputs: { images: number; load: () => Promise<InputFile[]> },
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const d = draftImage(req, inputs.images);
    this.jobs.checkServed('image', d.profile.profile, { steps: d.steps, images: inputs.images, audios: 0 });
    // the LoRA files found and matched to the profile's model before anything is fetched or queued
    const loras = await this.loras.resolve(d.profile.profile, d.loras);
    const timeout = checkTimeout(req.timeout, IMAGE_DEFAULTS.timeout);
    this.jobs.admit(req.callback_url, !req.dry_run);
    const images = await inputs.load();
    const probes = await this.inputs.probeImages(images);
    let { width, height, aspect } = d;
    if (d.size_from_ref) {
      [width, height] = sizeForTier(probes[0].width, probes[0].height, d.res);
      aspect = aspectOf(width, height);
    }
    // what the model's preprocessing would refuse at run time is refused now
    if (d.mode === 'edit') {
      probes.forEach((p, i) => {
        const problem = referenceProblem(`images[${i}]`, d.res, width, height, p.width, p.height);
        if (problem) throw new BadInputError(problem);
      });
    }
    // the job as a plan sees it: by size (a picture's contents do not change a plan)
    const planned: PlanRequest = {
      kind: 'image', prompt: req.prompt, negative_prompt: req.negative_prompt, profile: d.profile.profile, aspect: req.aspect, res: req.res,
      size: d.size_from_ref ? `${width}x${height}` : req.size, steps: req.steps, cfg: req.cfg, images: probes.map((p) => ({ width: p.width, height: p.height })),
    };
    if (req.dry_run) {
      // the plan of the job this request would make, checked above as a create is; nothing queued or stored, the
      // fetched pictures dropped with the request
      const plan = await this.planner.plan(planned, signal);
      if (loras.length) plan.notes.push('the plan leaves the LoRAs out: their low-rank pairs (held on the GPU beside their layers) and the work they add are not counted');
      return plan as unknown as Record<string, unknown>;
    }
    // a job that cannot fit the GPU is refused now, not failed once it ran out of memory
    await this.fit.check('image', d.profile.profile, planned, signal);
    const { job, created } = await this.jobs.submit(
      {
        kind: 'image', profile: d.profile.profile, aspect, res: d.res, size: `${width}x${height}`, size_from_ref: d.size_from_ref,
        callback_url: req.callback_url ?? null, priority: d.priority,
        task: { prompt: d.prompt, negative: d.negative, seed: d.seed, steps: d.steps, cfg: d.cfg, width, height, res: d.res, mode: d.mode, ...(loras.length ? { loras } : {}) },
      },
      images,
      [],
    );
    // the spec: creating returns the job as created (queued, with its position), whatever the scheduler does next
    return req.wait ? this.jobs.waitFor(job.id, timeout, signal) : created;
  }
}
