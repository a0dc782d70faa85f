// The trained demo checkpoint of the six video profiles (issue 18): a tiny MiniMax H3 that tools/train-demo/video.py
// trained on procedural clips, committed in the published diffusers layout under assets/demo/minimax-h3. It follows
// the demo grammar, "a <color> ball moving <left|right|up|down> on a <color> background, <high|low> beep"
// (docs/models/demo.md), where the random demo (demo.ts) makes noise. Both DiT partitions hold the trained
// transformer and the turbo adapters are zero deltas, so every profile samples the same model at its own step count.
import { planTrainedDemo, type TrainedDemoPlan } from '../common/trained-demo';

/** What the demo makes, for /api/config's note and the web page. */
export const TRAINED_H3_DEMO_GRAMMAR = 'a <color> ball moving <left|right|up|down> on a <color> background, <high|low> beep';

/** Where the committed checkpoint lives, under the repository root (the worker joins it to projectRoot()). */
export const TRAINED_H3_DEMO_PATH = 'assets/demo/minimax-h3';

/** The plan of the trained checkpoint (version: sha256 of every committed file), or undefined when it is absent. */
export function planTrainedDemoH3(dir: string): TrainedDemoPlan | undefined {
  return planTrainedDemo(dir);
}

/** What the page preselects while a video profile runs this checkpoint: the geometry it was trained at and a prompt. */
export const TRAINED_H3_DEMO_SUGGESTION = {
  aspect: '16:9',
  res: '352p',
  seconds: 1,
  prompt: 'a red ball moving right on a blue background, high beep',
  why: `the demo weights were trained on 1 s clips at 352p 16:9 (608x352) of "${TRAINED_H3_DEMO_GRAMMAR}"; other sizes and prompts run, but come out as some clip of that grammar`,
} as const;
