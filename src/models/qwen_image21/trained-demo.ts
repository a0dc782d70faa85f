// The trained demo checkpoint of imgmain / imgmain_bf16 (issue 18): tiny Qwen-Image-2.1 weights that
// tools/train-demo/image.py trained on procedural pictures, committed in the published diffusers layout under
// assets/demo/qwen-image-2.1. It draws the demo grammar, "a <color> <shape> [at the <position>] on a <color>
// background" (docs/models/demo.md), where the random demo (demo.ts) draws noise. The worker copies it into
// DEMO_WEIGHTS_DIR like any demo checkpoint; its version is the hash of the committed files, so a retrained
// checkpoint replaces the copy.
import { planTrainedDemo, type TrainedDemoPlan } from '../common/trained-demo';

/** What the demo draws, for /api/config's note and the web page. */
export const TRAINED_DEMO_GRAMMAR = 'a <color> <shape> [at the <position>] on a <color> background';

/** Where the committed checkpoint lives, under the repository root (the worker joins it to projectRoot()). */
export const TRAINED_DEMO_PATH = 'assets/demo/qwen-image-2.1';

/** The plan of the trained checkpoint (version: sha256 of every committed file), or undefined when it is absent. */
export function planTrainedDemoQwenImage21(dir: string): TrainedDemoPlan | undefined {
  return planTrainedDemo(dir);
}

/** What the page preselects while imgmain runs this checkpoint: a size and a prompt it was trained for. */
export const TRAINED_DEMO_SUGGESTION = {
  size: '256x256',
  prompt: 'a yellow circle at the left on a blue background',
  why: `the demo weights were trained at 256x256 and 512x512 on "${TRAINED_DEMO_GRAMMAR}"; other sizes and prompts run, but come out as some picture of that grammar`,
} as const;
