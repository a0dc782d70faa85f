// The spec's reference tables (service-api.md "Reference tables" and "Limits") as data, and the pure rules
// derived from them: frame grid, sizes. Everything user-visible about profiles comes from here.

export type JobKind = 'video' | 'image';
export type VideoMode = 't2v' | 'i2v';
export type ImageMode = 't2i' | 'edit';

export const VIDEO_ASPECTS = ['16:9', '9:16', '1:1'] as const;
export const VIDEO_RES = ['352p', '480p', '768p'] as const;
export const IMAGE_ASPECTS = ['1:1', '16:9', '9:16', '4:3', '3:4'] as const;
export const IMAGE_RES = ['1K', '2K'] as const;
export const TTS_LANGUAGES = [
  'Auto', 'Chinese', 'English', 'Japanese', 'Korean', 'German', 'French', 'Russian', 'Portuguese', 'Spanish', 'Italian',
] as const;

/** Video pixel sizes [width, height], all multiples of 32. */
export const VIDEO_SIZES: Record<string, Record<string, [number, number]>> = {
  '16:9': { '352p': [608, 352], '480p': [864, 480], '768p': [1344, 768] },
  '9:16': { '352p': [352, 608], '480p': [480, 864], '768p': [768, 1344] },
  '1:1': { '352p': [480, 480], '480p': [672, 672], '768p': [1024, 1024] },
};

/** Image pixel sizes [width, height]: 1K about 1 megapixel, 2K about 4. */
export const IMAGE_SIZES: Record<string, Record<string, [number, number]>> = {
  '1:1': { '1K': [1024, 1024], '2K': [2048, 2048] },
  '16:9': { '1K': [1344, 768], '2K': [2752, 1536] },
  '9:16': { '1K': [768, 1344], '2K': [1536, 2752] },
  '4:3': { '1K': [1152, 864], '2K': [2304, 1728] },
  '3:4': { '1K': [864, 1152], '2K': [1728, 2304] },
};

export interface ProfileInfo {
  profile: string;
  kind: JobKind;
  default_steps: number;
  description: string;
  /** The spec's default profile of its kind. */
  default: boolean;
  /** Modes the profile accepts. */
  modes: string[];
  max_images: number;
  max_audios: number;
  /** Image profiles: whether images mean editing (true) or style references (false). */
  can_edit?: boolean;
  default_cfg?: number;
  /** The open model behind the profile (shared/spec/models.md). */
  model: string;
}

/** fastvid_fast has no description in the spec. We serve it as fastvid sampled in 6 steps: the distilled
 * 8-step weights hold up well at 6, a quarter faster, and it needs no extra checkpoint (README: "Profiles"). */
export const VIDEO_PROFILES: ProfileInfo[] = [
  { profile: 'fastvid', kind: 'video', default_steps: 8, default: true, description: 'Distilled full model, best quality among the fast profiles', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
  { profile: 'turbo_int8', kind: 'video', default_steps: 8, default: false, description: 'Lightweight-adapter variant, slightly different style, similar speed', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
  { profile: 'fastvid_4step_int8', kind: 'video', default_steps: 4, default: false, description: 'Fastest, slightly softer detail', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
  { profile: 'fastvid_fast', kind: 'video', default_steps: 6, default: false, description: 'fastvid weights sampled in 6 steps: about a quarter faster, a little softer', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
  { profile: 'basevid50_sol', kind: 'video', default_steps: 50, default: false, description: 'Original 50-step model with attention and cache optimisations, best quality', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
  { profile: 'basevid50', kind: 'video', default_steps: 50, default: false, description: 'Original 50-step model, slow', modes: ['t2v', 'i2v'], max_images: 6, max_audios: 3, model: 'MiniMax H3' },
];

export const IMAGE_PROFILES: ProfileInfo[] = [
  { profile: 'imgmain', kind: 'image', default_steps: 25, default: true, default_cfg: 1, can_edit: true, description: '8-bit integer quantised; text-to-image and editing; 25 default steps', modes: ['t2i', 'edit'], max_images: 10, max_audios: 0, model: 'Qwen-Image-2.1' },
  { profile: 'imgmain_bf16', kind: 'image', default_steps: 25, default: false, default_cfg: 1, can_edit: true, description: 'Full-precision variant of imgmain, roughly twice as slow', modes: ['t2i', 'edit'], max_images: 10, max_audios: 0, model: 'Qwen-Image-2.1' },
  { profile: 'imgart_turbo', kind: 'image', default_steps: 8, default: false, default_cfg: 1, can_edit: false, description: '8-step distilled, art-oriented; text-to-image and style references only, cannot edit', modes: ['t2i'], max_images: 3, max_audios: 0, model: 'Krea 2 Turbo' },
  { profile: 'imgart_turbo_int8', kind: 'image', default_steps: 8, default: false, default_cfg: 1, can_edit: false, description: '8-bit integer quantised variant of imgart_turbo', modes: ['t2i'], max_images: 3, max_audios: 0, model: 'Krea 2 Turbo' },
];

export const TTS_PROFILE = 'tts';

export function findProfile(kind: JobKind, profile: string): ProfileInfo | undefined {
  return (kind === 'video' ? VIDEO_PROFILES : IMAGE_PROFILES).find((p) => p.profile === profile);
}

export const FPS = 24;

/** Frames for a clip: seconds at 24 fps rounded up to the model grid 17k+5 (5 s -> 124 frames). */
export function snapFrames(seconds: number): number {
  const raw = Math.ceil(seconds * FPS - 1e-9);
  const k = Math.max(0, Math.ceil((raw - 5) / 17));
  return 17 * k + 5;
}

/** Scales a w x h picture to about `tier` pixels (1K = 1024^2, 2K = 2048^2), keeping aspect, sides multiples of 32. */
export function sizeForTier(w: number, h: number, res: string): [number, number] {
  const area = res === '2K' ? 2048 * 2048 : 1024 * 1024;
  const scale = Math.sqrt(area / (w * h));
  const snap = (v: number) => Math.min(4096, Math.max(256, Math.round((v * scale) / 32) * 32));
  return [snap(w), snap(h)];
}

/** Smallest whole-number ratio, e.g. 1280x720 -> "16:9". */
export function aspectOf(w: number, h: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}

/** Stages in order of progression: the spec's exact strings. */
export const STAGE = {
  loadModel: '加载模型',
  loadTextEncoder: '加载文本编码器',
  encode: '编码提示词/图片',
  sample: '采样',
  videoDecode: '视频解码',
  audioDecode: '音频解码',
  package: '封装',
  save: '保存',
} as const;
export type Stage = (typeof STAGE)[keyof typeof STAGE];
