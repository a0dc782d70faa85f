// What every image pipeline's task carries (Qwen-Image-2.1's ImageTask and Krea 2's Krea2ImageTask extend it with
// what only their model reads); the GPU worker maps its protocol's task onto it (src/worker/profiles/image-task.ts).
import type { PngParameters } from '../../media';

export interface ImageJobTask {
  prompt: string;
  /** Used only when cfg > 1. */
  negative: string;
  /** True CFG scale; <= 1 means one transformer pass per step. */
  cfg: number;
  /** u32; the noise is a function of it, so the same task gives the same image. */
  seed: number;
  steps: number;
  /** Output size in pixels (each model's grid). */
  width: number;
  height: number;
  /** Reference image files, in request order (what they mean is the model's). */
  references: string[];
  /** png, written through a temp name. */
  outputPath: string;
  /** Recorded in the png's text chunks. */
  png: PngParameters;
}
