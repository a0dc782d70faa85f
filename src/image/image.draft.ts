// The spec's semantic rules for a image create request (HTTP 400 with a reason a user can act on). Types were already
// checked (422) by the DTO layer; here values are checked and defaults resolved, once: where a request becomes a job.
// The defaults, bounds and input rules are the capability table's (catalog/capabilities.ts). Pure: no I/O.
import { BadInputError } from '../common/errors';
import { IMAGE_DEFAULTS, IMAGE_PROFILES, IMAGE_SIZES, aspectOf, capabilitiesOf, type LoraChoice, type ProfileInfo } from '../catalog';
import { checkPrompt, oneOf, promptAnd, resolveLoras, resolvePriority, resolveSeed, resolveSteps } from '../jobs/job-requests';

export interface ImageRequest {
  prompt?: string; negative_prompt?: string; profile?: string; aspect?: string; res?: string; size?: string;
  size_from_ref?: boolean; seed?: number; steps?: number; cfg?: number; timeout?: number; priority?: number;
  /** [{ name, scale? }], or its JSON text (a multipart field). */
  loras?: unknown;
}

export interface ImageDraft {
  prompt: string; negative: string; profile: ProfileInfo; aspect: string; res: string; width: number; height: number;
  size_from_ref: boolean; seed: number; steps: number; cfg: number; mode: 't2i' | 'edit'; priority: number;
  /** By name and scale; the LoRA library (src/loras/) finds and checks the files. */
  loras: LoraChoice[];
}

/** Image create rules. With size_from_ref the size is set later, from the first image (see sizeForTier). */
export function draftImage(r: ImageRequest, imageCount: number): ImageDraft {
  return promptAnd(() => checkPrompt(r.prompt), (prompt) => imageDraft(r, imageCount, prompt));
}

function imageDraft(r: ImageRequest, imageCount: number, prompt: string): ImageDraft {
  const def = IMAGE_DEFAULTS;
  const profileName = r.profile ?? def.profile;
  const profile = IMAGE_PROFILES.find((p) => p.profile === profileName);
  const caps = capabilitiesOf('image', profileName);
  if (!profile || !caps) oneOf('profile', profileName, IMAGE_PROFILES.map((p) => p.profile), 'image profile');
  let aspect = oneOf('aspect', r.aspect ?? def.aspect, caps!.aspects);
  let res = oneOf('res', r.res ?? def.res, caps!.res);
  if (imageCount > profile!.max_images) {
    throw new BadInputError(profile!.can_edit
      ? `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images}`
      : `too many images: ${imageCount} given, ${profile!.profile} takes at most ${profile!.max_images} style references`);
  }
  const size_from_ref = r.size_from_ref ?? def.size_from_ref;
  const size = (r.size ?? def.size).trim();
  let [width, height] = IMAGE_SIZES[aspect][res];
  if (size !== '') {
    const m = /^(\d+)x(\d+)$/.exec(size);
    if (!m) throw new BadInputError(`size must be <width>x<height>, e.g. 1280x720 (got ${JSON.stringify(r.size)})`);
    [width, height] = [Number(m[1]), Number(m[2])];
    for (const [side, v] of [['width', width], ['height', height]] as const) {
      const { multiple_of: m, min, max } = caps!.explicit_size;
      if (v % m !== 0 || v < min || v > max) throw new BadInputError(`size: ${side} ${v} must be a multiple of ${m} from ${min} to ${max}`);
    }
    if (size_from_ref) throw new BadInputError('give either size or size_from_ref, not both');
    aspect = aspectOf(width, height);
    res = 'custom';
  }
  if (size_from_ref) {
    if (!profile!.can_edit) {
      const editors = IMAGE_PROFILES.filter((p) => p.can_edit).map((p) => p.profile).join(' and ');
      throw new BadInputError(`size_from_ref is for editing; ${profile!.profile} cannot edit (its images are style references): ${editors} edit`);
    }
    if (imageCount === 0) throw new BadInputError('size_from_ref needs at least one image to take the size from');
  }
  const cfgIn = r.cfg ?? def.cfg;
  const cfg = caps!.cfg;
  if (!Number.isFinite(cfgIn) || cfgIn < 0 || (cfgIn > 0 && cfgIn < 1) || cfgIn > cfg.max) throw new BadInputError(`cfg must be 0 (profile default, ${cfg.default}) or from 1 to ${cfg.max} (got ${cfgIn})`);
  return {
    prompt, negative: r.negative_prompt ?? def.negative_prompt, profile: profile!, aspect, res, width, height, size_from_ref,
    seed: resolveSeed(r.seed), steps: resolveSteps(r.steps, profile!), cfg: cfgIn === 0 ? cfg.default : cfgIn,
    // Style references (imgart_turbo with images) keep mode t2i: the content is not edited, only the look guided.
    mode: imageCount > 0 && profile!.can_edit ? 'edit' : 't2i',
    priority: resolvePriority(r.priority),
    loras: resolveLoras(r.loras, caps!.loras, profile!.profile),
  };
}
