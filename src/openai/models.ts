// The `model` of an OpenAI request -> a Kiln profile. Kiln's own profile names are models; OpenAI's model names map
// to the default profile of their kind (README "Using Kiln from OpenAI clients"), so an app set up for OpenAI works
// by changing its base URL and key only.
import { BadInputError } from '../common/errors';
import { IMAGE_DEFAULTS, IMAGE_PROFILES, TTS_PROFILE, VIDEO_DEFAULTS, VIDEO_PROFILES } from '../catalog';

export const OPENAI_IMAGE_MODELS = ['gpt-image-1', 'gpt-image-1-mini', 'gpt-image-1.5', 'dall-e-2', 'dall-e-3'] as const;
export const OPENAI_VIDEO_MODELS = ['sora-2', 'sora-2-pro'] as const;

export type ModelKind = 'image' | 'video' | 'tts';

/** Every model /v1/models lists: each profile, with its kind (an extension field the SDK passes through). */
export function kilnModels(): { id: string; kind: ModelKind }[] {
  return [
    ...IMAGE_PROFILES.map((p) => ({ id: p.profile, kind: 'image' as const })),
    ...VIDEO_PROFILES.map((p) => ({ id: p.profile, kind: 'video' as const })),
    { id: TTS_PROFILE, kind: 'tts' as const },
  ];
}

/** The image profile `model` names; a 400 that lists what Kiln offers when it names none. */
export function imageProfileOf(model: string | undefined): string {
  if (model === undefined || (OPENAI_IMAGE_MODELS as readonly string[]).includes(model)) return IMAGE_DEFAULTS.profile;
  if (IMAGE_PROFILES.some((p) => p.profile === model)) return model;
  const other = kilnModels().find((m) => m.id === model);
  const offered = `image models here: ${IMAGE_PROFILES.map((p) => p.profile).join(', ')} (and ${OPENAI_IMAGE_MODELS.join(', ')}, which run ${IMAGE_DEFAULTS.profile})`;
  if (other) throw new BadInputError(`model ${model} makes ${other.kind === 'tts' ? 'speech' : 'videos'}, not images; ${offered}`);
  throw new BadInputError(`unknown model ${JSON.stringify(model)}; ${offered}`);
}


/** The editing profile `model` names (an image profile that edits: imgmain's family); 400 otherwise. */
export function editProfileOf(model: string | undefined): string {
  const profile = imageProfileOf(model);
  const editing = IMAGE_PROFILES.filter((p) => p.can_edit).map((p) => p.profile);
  if (!editing.includes(profile)) throw new BadInputError(`model ${profile} takes style references, not pictures to edit; editing models here: ${editing.join(', ')} (and ${OPENAI_IMAGE_MODELS.join(', ')}, which run ${IMAGE_DEFAULTS.profile})`);
  return profile;
}

/** The video profile `model` names: a Kiln video profile, or an OpenAI video model (sora-2, sora-2-pro and their
 * dated snapshots) for the default profile; a 400 that lists what Kiln offers otherwise. */
export function videoProfileOf(model: string | undefined): string {
  if (model === undefined || OPENAI_VIDEO_MODELS.some((m) => model === m || model.startsWith(`${m}-20`))) return VIDEO_DEFAULTS.profile;
  if (VIDEO_PROFILES.some((p) => p.profile === model)) return model;
  const other = kilnModels().find((m) => m.id === model);
  const offered = `video models here: ${VIDEO_PROFILES.map((p) => p.profile).join(', ')} (and ${OPENAI_VIDEO_MODELS.join(', ')}, which run ${VIDEO_DEFAULTS.profile})`;
  if (other) throw new BadInputError(`model ${model} makes ${other.kind === 'tts' ? 'speech' : 'images'}, not videos; ${offered}`);
  throw new BadInputError(`unknown model ${JSON.stringify(model)}; ${offered}`);
}
