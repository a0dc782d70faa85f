// The protocol's image task as every image pipeline takes it (models/common/image-task.ts); each profile adds what
// only its model reads (Qwen-Image-2.1: the references' area).
import type { ImageJobTask } from '../../models/common/image-task';
import type { ImageTask } from '../protocol';

export function imageTaskFields(t: ImageTask): ImageJobTask {
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
