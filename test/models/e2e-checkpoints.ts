// The checkpoints the end-to-end pipeline goldens run (issue 19 item 5): the service's demo checkpoints, tiny random
// models in the published formats (diffusers folders for Qwen-Image-2.1 and MiniMax H3, the Qwen3-TTS repo layout),
// written by the same code the worker uses when WEIGHTS_DIR has no real weights. The generators load them with
// upstream's from_pretrained; the fixtures record every file's sha256, and the tests write the checkpoint again and
// refuse to compare when a file differs (a changed demo generator means the goldens must be regenerated).
//
//   node build/golden/test/models/e2e-checkpoints.js <qwen_image21 | qwen3_tts | minimax_h3> <dir>
// (after `npx tsc -p tsconfig.test.json --outDir build/golden`; tools/golden/*_pipeline.py say the whole recipe)
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { Engine } from '../../src/engine/engine';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { planDemoQwen3Tts } from '../../src/models/qwen3_tts/demo';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';

export const E2E_PIPELINES = ['qwen_image21', 'qwen3_tts', 'minimax_h3'] as const;
export type E2ePipeline = (typeof E2E_PIPELINES)[number];

/** Writes the demo checkpoint of `pipeline` into `dir`. */
export async function writeE2eCheckpoint(e: Engine, pipeline: E2ePipeline, dir: string): Promise<void> {
  const plan = pipeline === 'qwen_image21' ? await planDemoQwenImage21(e) : pipeline === 'qwen3_tts' ? await planDemoQwen3Tts(e) : await planDemoH3(e);
  await plan.write(dir);
}

/** sha256 of every file under `dir`, by relative path (posix separators), sorted. */
export function checkpointHashes(dir: string): Record<string, string> {
  const out: [string, string][] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push([relative(dir, p).split(sep).join('/'), createHash('sha256').update(readFileSync(p)).digest('hex')]);
    }
  };
  walk(dir);
  out.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(out);
}

async function main(argv: string[]): Promise<void> {
  const [pipeline, dir] = argv;
  if (!E2E_PIPELINES.includes(pipeline as E2ePipeline) || !dir) {
    throw new Error(`usage: e2e-checkpoints.js <${E2E_PIPELINES.join(' | ')}> <dir>`);
  }
  const e = await Engine.create({ allowSoftware: true });
  try {
    await writeE2eCheckpoint(e, pipeline as E2ePipeline, dir);
  } finally {
    await e.shutdown();
  }
  console.log(JSON.stringify(checkpointHashes(dir), null, 1));
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
