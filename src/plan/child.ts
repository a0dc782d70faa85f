// The planner's child process (src/plan/planner.ts starts it): reads one request from stdin as JSON
//   { "request": <PlanRequest>, "budget_bytes"?: number, "gpu"?: <the adapter the GPU worker reported, /api/health's gpu> }
// plans it (plan.ts, on the shape-only engine) and writes one line of JSON to stdout, then exits:
//   { "plan": <JobPlan> }  |  { "bad_input": "<why, as a 400 says it>" }  |  { "error": "<what went wrong>" }
// It runs in its own process so that the API process never loads the engine (docs/architecture.md).
import { BadInputError } from '../common/errors';
import { adapterFor } from './adapter-for';
import { planJob, type PlanRequest } from './plan';

async function main(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: PlanRequest; budget_bytes?: number; gpu?: Record<string, unknown> };
  const { adapter, note } = adapterFor(input.gpu);
  const plan = await planJob(input.request, { adapter, budgetBytes: input.budget_bytes });
  if (note) plan.notes.unshift(note);
  return write({ plan });
}

function write(answer: unknown): void {
  process.stdout.write(`${JSON.stringify(answer)}\n`, () => process.exit(0));
}

main().catch((e: unknown) => {
  if (e instanceof BadInputError) write({ bad_input: e.message });
  else write({ error: e instanceof Error ? e.message : String(e) });
});
