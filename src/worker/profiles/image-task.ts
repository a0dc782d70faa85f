// What every image pipeline takes from the protocol's image task: the prompt and sampling parameters, the size,
// the reference files (edit references for Qwen-Image-2.1, style references for Krea 2), where the png goes and
// what its text chunks record. Each profile adds what only its model reads.
import type { PngParameters } from '../../media';
import type { ImageTask } from '../protocol';

export interface ImageTaskFields {
  prompt: string;
  negative: string;
  cfg: number;
  seed: number;
  steps: number;
  width: number;
  height: number;
  references: string[];
  outputPath: string;
  png: PngParameters;
}

export function imageTaskFields(t: ImageTask): ImageTaskFields {
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
