// A trained demo checkpoint committed under assets/demo/<model> (issue 18): tiny weights that tools/train-demo trained
// on procedural data, in the published layout, so they load through the real loaders. The worker copies one into
// DEMO_WEIGHTS_DIR like any demo checkpoint; its version is the hash of the committed files, so a retrained checkpoint
// replaces the copy.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/** A committed checkpoint as a demo plan: its version and how to put it into a folder. */
export interface TrainedDemoPlan {
  version: string;
  write(to: string): Promise<void>;
}

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

/** The plan of the checkpoint committed at `dir` (version: sha256 of every file's path and bytes), or undefined when
 * the checkout lacks it (no `model_index.json` there). */
export function planTrainedDemo(dir: string): TrainedDemoPlan | undefined {
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
