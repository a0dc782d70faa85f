// What every image pipeline's task carries (Qwen-Image-2.1's QwenImageTask and Krea 2's Krea2ImageTask extend it with
// what only their model reads), made from the worker's image task by imageJobTaskOf (each model's task.ts adds its own).
import type { ImageParams, ImageTask } from '../../catalog';
import type { PngParameters } from '../../media';

/** The worker's params it takes as they are: `negative` (used only when cfg > 1), `cfg` (true CFG scale; <= 1 means one
 * transformer pass per step), `seed` (u32; the noise is a function of it, so the same task gives the same image),
 * `width` and `height` (output pixels, each model's grid). */
export interface ImageJobTask extends Pick<ImageParams, 'prompt' | 'negative' | 'cfg' | 'seed' | 'steps' | 'width' | 'height'> {
  /** Reference image files, in request order (what they mean is the model's). */
  references: string[];
  /** png, written through a temp name. */
  outputPath: string;
  /** Recorded in the png's text chunks. */
  png: PngParameters;
}

/** The worker's image task (catalog/tasks.ts) as every image pipeline takes it; the png records the request. */
export function imageJobTaskOf(t: ImageTask): ImageJobTask {
  const p = t.params;
  return {
    prompt: p.prompt,
    negative: p.negative,
    cfg: p.cfg,
    seed: p.seed,
    steps: p.steps,
    width: p.width,
    height: p.height,
    references: t.images,
    outputPath: t.output,
    png: { prompt: p.prompt, profile: t.profile, seed: p.seed, steps: p.steps, negative_prompt: p.negative, cfg: p.cfg, mode: p.mode },
  };
}
