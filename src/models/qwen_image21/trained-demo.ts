// The trained demo checkpoint of imgmain / imgmain_bf16 (issue 18): tiny Qwen-Image-2.1 weights that
// tools/train-demo/image.py trained on procedural pictures, committed in the published diffusers layout under
// assets/demo/qwen-image-2.1. It draws the demo grammar, "a <color> <shape> [at the <position>] on a <color>
// background" (docs/models/demo.md), where the random demo (demo.ts) draws noise. The worker copies it into
// DEMO_WEIGHTS_DIR like any demo checkpoint; its version is the hash of the committed files, so a retrained
// checkpoint replaces the copy.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/** What the demo draws, for /api/config's note and the web page. */
export const TRAINED_DEMO_GRAMMAR = 'a <color> <shape> [at the <position>] on a <color> background';

/** Where the committed checkpoint lives, under the repository root (the worker joins it to projectRoot()). */
export const TRAINED_DEMO_PATH = 'assets/demo/qwen-image-2.1';

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out;
}

/** The plan of the trained checkpoint (version: sha256 of every committed file), or undefined when it is absent. */
export function planTrainedDemoQwenImage21(dir: string): { version: string; write(to: string): Promise<void> } | undefined {
  if (!existsSync(join(dir, 'model_index.json'))) return undefined;
  const files = filesUnder(dir);
  const h = createHash('sha256');
  for (const f of files) h.update(f).update('\0').update(readFileSync(join(dir, f))).update('\0');
  return {
    version: `trained-${h.digest('hex').slice(0, 16)}`,
    write: async (to: string) => {
      for (const f of files) {
        await mkdir(dirname(join(to, f)), { recursive: true });
        await copyFile(join(dir, f), join(to, f));
      }
    },
  };
}

/** What the page preselects while imgmain runs this checkpoint: a size and a prompt it was trained for. */
export const TRAINED_DEMO_SUGGESTION = {
  size: '256x256',
  prompt: 'a yellow circle at the left on a blue background',
  why: `the demo weights were trained at 256x256 and 512x512 on "${TRAINED_DEMO_GRAMMAR}"; other sizes and prompts run, but come out as some picture of that grammar`,
} as const;
