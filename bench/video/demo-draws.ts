// npm run bench:video-demo [-- --prompts 8] [--pick-seed 18] [--steps N]
// The trained video demo's score on its grammar, through the real API (DEMO_VIDEO=trained, fastvid, 352p 1 s): `--prompts`
// prompts of the grammar (every direction in turn, the beeps alternating, colors drawn with --pick-seed; job seeds
// 100, 101, ...), each clip judged for the ball's color, its direction of motion and the beep's band (the judge of
// tools/train-demo/video_eval.py). Issue 18's bar: all three right in at least 7 of 8; exit 1 below it. A job takes
// about 5 minutes on lavapipe (2 cores), so this is a bench, not a test: test/api/demo-video-draws runs one prompt.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pickVideoPrompts, videoPromptText } from '../../test/api/demo-video-grammar';
import { judgePromptClip, runDemoVideoJob } from '../../test/api/demo-video-jobs';
import { startAppOnDemoWeights } from '../../test/api/harness';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} takes a positive integer, got ${process.argv[i + 1]}`);
  return v;
}

async function main(): Promise<void> {
  const prompts = arg('prompts', 8);
  const pickSeed = arg('pick-seed', 18);
  const steps = process.argv.includes('--steps') ? arg('steps', 8) : undefined;
  const t = await startAppOnDemoWeights({ env: { DEMO_VIDEO: 'trained' } });
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-bench-demo-video-'));
  let right = 0;
  let jobSteps = 0;
  const started = Date.now();
  try {
    for (const [i, p] of pickVideoPrompts(prompts, pickSeed).entries()) {
      const { path, job } = await runDemoVideoJob(t, { prompt: videoPromptText(p), seed: 100 + i, ...(steps ? { steps } : {}) }, scratch);
      const { ok, line } = judgePromptClip(p, path);
      jobSteps = job.steps;
      if (ok) right++;
      console.log(`${line}; exec_s ${job.exec_s}`);
    }
  } finally {
    await t.close(true);
    rmSync(scratch, { recursive: true, force: true });
  }
  const bar = Math.ceil((7 / 8) * prompts);
  console.log(`all three right in ${right}/${prompts} (fastvid, ${jobSteps} steps; bar ${bar}); ${((Date.now() - started) / 1000).toFixed(0)} s`);
  if (right < bar) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
