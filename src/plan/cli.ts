// npm run plan -- '<request JSON>' [--json] [--adapter h200|lavapipe] [--budget 16GiB] [--tuning DIR] [--shapes]
// Prints a job's plan (plan.ts): peak GPU memory per stage, resident weights, work per stage and per step, and a
// predicted step and sampling time where the adapter has measured rates (its tuning table's, step-time.ts, else a
// whole step's, calibration.ts). Needs no GPU and no weights.
//   --budget   bytes or with a unit (16GiB, 12GB, 24000MiB); default GPU_MEMORY_BUDGET, else the adapter's memory less 5 %
//   --shapes   also list a step's GEMM and attention shapes, most FLOPs first (per_step.shapes in --json)
//   --tuning   the folder of tuning tables whose measured rates predict the step (default the repository's tuning/;
//              a GPU run's $OUT, to see its table's prediction before committing it)
import { BadInputError } from '../common/errors';
import { fmtBytes } from '../engine/memory';
import { planJob, type JobPlan, type PlanRequest } from './plan';
import { parseBytes } from '../common/bytes';

function usage(msg: string): never {
  console.error(`plan: ${msg}\nusage: npm run plan -- '{"prompt": "a kite", "profile": "imgart_turbo", "size": "1024x1024"}' [--json] [--adapter h200|lavapipe] [--budget 16GiB] [--tuning DIR] [--shapes]`);
  process.exit(2);
}

/** `text` padded to `width` terminal columns (the stage names are CJK: two columns a character). */
const padColumns = (text: string, width: number) => text + ' '.repeat(Math.max(1, width - [...text].reduce((w, ch) => w + (ch.charCodeAt(0) >= 0x2e80 ? 2 : 1), 0)));

const tf = (n: number) => (n >= 1e12 ? `${(n / 1e12).toFixed(2)} TFLOP` : `${(n / 1e9).toFixed(2)} GFLOP`);

export function formatPlan(p: JobPlan, shapes = false): string[] {
  const j = p.job;
  const what = p.kind === 'tts'
    ? `tts request on ${p.profile} (${p.model}): ${j.text_chars} characters of text${j.seconds ? ` spoken for ${j.seconds} s` : ''}, a ${j.ref_seconds} s reference clip, language ${j.language}; adapter ${p.adapter.name}`
    : undefined;
  const out = [
    what ?? `${p.kind} job on ${p.profile} (${p.model}) at ${p.job.width}x${p.job.height}${p.job.frames ? `, ${p.job.frames} frames (${p.job.seconds} s)` : ''}, ${p.job.steps} steps${p.job.cfg !== undefined ? `, cfg ${p.job.cfg}` : ''}${p.job.images ? `, ${p.job.images} images${p.job.image_mode ? ` (${p.job.image_mode})` : ''}` : ''}${p.job.audios ? `, ${p.job.audios} clips (${p.job.audio_mode})` : ''}; adapter ${p.adapter.name}`,
    `peak GPU memory: ${fmtBytes(p.peak_gpu_bytes)} (${p.fits ? 'fits' : 'does NOT fit'} the ${fmtBytes(p.budget_bytes)} budget)`,
    `resident after loading: ${p.resident.map((r) => `${r.stage} ${fmtBytes(r.bytes)}`).join(', ')}`,
    '',
    'stage               peak GPU     held at end   work          bytes bound   dispatches  steps',
  ];
  for (const s of p.stages) {
    out.push(`${padColumns(s.stage, 20)}${fmtBytes(s.peak_gpu_bytes).padEnd(13)}${fmtBytes(s.held_gpu_bytes).padEnd(14)}${tf(s.flops).padEnd(14)}${fmtBytes(s.bytes).padEnd(14)}${String(s.dispatches).padEnd(12)}${s.steps}`);
  }
  out.push('', `total: ${tf(p.flops)}, ${fmtBytes(p.bytes)} bound, ${p.dispatches} dispatches`);
  if (p.per_step) out.push(`per sampling step: ${tf(p.per_step.flops)}, ${fmtBytes(p.per_step.bytes)} bound, ${p.per_step.dispatches} dispatches`);
  if (p.per_step && shapes) {
    for (const s of p.per_step.shapes) out.push(`  ${s.shape.padEnd(44)} ${String(s.calls).padStart(5)} calls  ${tf(s.flops).padStart(12)}  ${(100 * s.share).toFixed(1).padStart(5)} %`);
  }
  const pr = p.predicted;
  if ('step_s' in pr) {
    const parts = Object.entries(pr.by_class).map(([k, s]) => `${k} ${(s * 1e3).toFixed(1)} ms`).join(', ');
    out.push(`predicted step time: ${pr.step_s.toFixed(3)} s (${parts}); sampling ${pr.sampling_s.toFixed(1)} s (${pr.basis})`);
  } else out.push('sampling_s' in pr ? `predicted sampling time: ${pr.sampling_s.toFixed(1)} s (${pr.basis})` : `predicted time: none (${pr.none})`);
  out.push(`offload: ${p.offload.note}`);
  for (const n of p.notes) out.push(`note: ${n}`);
  return out;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let json = false;
  let adapter: string | undefined;
  let budget: number | undefined = process.env.GPU_MEMORY_BUDGET ? parseBytes(process.env.GPU_MEMORY_BUDGET, 'GPU_MEMORY_BUDGET') : undefined;
  let tuningDir: string | undefined;
  let shapes = false;
  let request: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--json') json = true;
    else if (a === '--shapes') shapes = true;
    else if (a === '--adapter') adapter = args[++i] ?? usage('--adapter needs a name');
    else if (a === '--tuning') tuningDir = args[++i] ?? usage('--tuning needs a folder');
    else if (a === '--budget') budget = parseBytes(args[++i] ?? usage('--budget needs a size'), '--budget');
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else if (request === undefined) request = a;
    else usage('give one request');
  }
  if (request === undefined) usage('give a request as JSON');
  let r: PlanRequest;
  try {
    r = JSON.parse(request) as PlanRequest;
  } catch (e) {
    usage(`the request is not JSON: ${(e as Error).message}`);
  }
  if (typeof r !== 'object' || r === null || Array.isArray(r)) usage('the request must be a JSON object');
  const p = await planJob(r, { adapter, budgetBytes: budget, tuningDir });
  console.log(json ? JSON.stringify(p, null, 2) : formatPlan(p, shapes).join('\n'));
}

main().catch((e: unknown) => {
  if (e instanceof BadInputError || (e instanceof Error && /^unknown adapter|^--budget|GPU_MEMORY_BUDGET/.test(e.message))) usage(e.message);
  console.error(e);
  process.exit(1);
});
