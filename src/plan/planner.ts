// dry_run on the create endpoints (README "Dry runs"): the API's side of a plan. The API process never loads the
// engine (docs/architecture.md), so each plan runs in a child process (child.ts: plan.ts on the shape-only engine)
// with a time limit; PLANNER_SLOTS run at once and PLANNER_WAITING more wait their turn, beyond that the answer is
// 429. Answers are kept by the planned request (every field a plan reads, the prompt's text included: the
// tokenizer's merges make its token count depend on the text, not only its length) with the adapter and budget, so
// the same form asked again is answered at once.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { BadInputError, CancelledError, QueueFullError, UnavailableError } from '../common/errors';
import type { JobPlan, PlanRequest } from './plan';

/** Plans running at once (each is one busy core while it runs). */
export const PLANNER_SLOTS = 1;
/** Plans waiting for a slot before a request is answered 429. */
export const PLANNER_WAITING = 4;
/** One plan's time limit (a 768p 10 s video takes about 20 s on a 2-core box; 40 s when it is loaded). */
export const PLAN_TIMEOUT_MS = 180_000;
/** Answers kept (the most recently used). */
const CACHE_SIZE = 64;

const SHUTTING_DOWN = 'the service is shutting down; ask again once it is back';

/** A plan as dry_run answers it: the plan (what `npm run plan -- '<json>' --json` prints) marked as a dry run. */
export type DryRunAnswer = JobPlan & { dry_run: true };

export interface PlannerOptions {
  /** GPU_MEMORY_BUDGET in bytes; undefined: the adapter's memory less 5 %. */
  budgetBytes?: number;
  /** The adapter the GPU worker reported (/api/health's gpu). */
  gpu: () => Promise<Record<string, unknown> | undefined>;
  /** The child's entry (default: child.js beside this file). */
  script?: string;
  timeoutMs?: number;
}

/** A text field as a plan's shape sees it: given or not. */
const nonEmpty = (t: unknown): boolean => typeof t === 'string' && t.trim() !== '';

/** Keeps `value` as the newest of `answers`, the oldest dropped past CACHE_SIZE. */
function keep(answers: Map<string, DryRunAnswer>, key: string, value: DryRunAnswer): void {
  answers.delete(key);
  answers.set(key, value);
  if (answers.size > CACHE_SIZE) answers.delete(answers.keys().next().value!);
}

/** JSON with object keys sorted at every level. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().filter((k) => (v as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

export class Planner {
  private running = 0;
  private readonly queue: (() => void)[] = [];
  /** The plans in flight: each child and how to stop it with a reason. */
  private readonly children = new Map<ChildProcess, (why: Error) => void>();
  private closed = false;
  private readonly cache = new Map<string, DryRunAnswer>();
  /** fit(): answers by the job's shape. */
  private readonly shapes = new Map<string, DryRunAnswer>();

  constructor(private readonly o: PlannerOptions) {}

  /** The plan of `request` (a PlanRequest the create path has already drafted and checked): a BadInputError where
   * the planner refuses it, QueueFullError when PLANNER_WAITING plans wait already, UnavailableError past the time
   * limit, CancelledError when `signal` fires (the client went away). */
  async plan(request: PlanRequest, signal?: AbortSignal, o: { waitAlways?: boolean } = {}): Promise<DryRunAnswer> {
    const gpu = await this.o.gpu();
    const key = this.keyOf({ request }, gpu);
    const hit = this.cache.get(key);
    if (hit) {
      keep(this.cache, key, hit);
      return structuredClone(hit);
    }
    await this.slot(signal, o.waitAlways);
    try {
      const plan = await this.run({ request, ...(this.o.budgetBytes !== undefined ? { budget_bytes: this.o.budgetBytes } : {}), gpu }, signal);
      const answer: DryRunAnswer = { dry_run: true, ...plan };
      keep(this.cache, key, answer);
      return structuredClone(answer);
    } finally {
      this.running--;
      this.queue.shift()?.();
    }
  }

  /** Creation's fit check (fit-check.ts): the plan of `request` as `plan` makes it, but from answers kept by the job's
   * shape (the request less its texts and seed, which change a plan's peak only through the prompt's token count: a
   * shape's answer is reused while its peak is more than 1 % of the budget away from the budget, else the request is
   * planned itself), and waiting its turn however many plans wait: a job is never refused 429 because dry runs keep
   * the planner busy. */
  async fit(request: PlanRequest, signal?: AbortSignal): Promise<DryRunAnswer> {
    const shape = { ...request, prompt: undefined, negative_prompt: undefined, seed: undefined, tts_text: nonEmpty(request.tts_text), tts_ref_text: nonEmpty(request.tts_ref_text) };
    const key = this.keyOf({ shape }, await this.o.gpu());
    const hit = this.shapes.get(key);
    if (hit && Math.abs(hit.peak_gpu_bytes - hit.budget_bytes) > 0.01 * hit.budget_bytes) return structuredClone(hit);
    const plan = await this.plan(request, signal, { waitAlways: true });
    keep(this.shapes, key, plan);
    return plan;
  }

  /** The key of a kept answer: what was planned, with the budget and the adapter it was planned for. */
  private keyOf(what: object, gpu: Record<string, unknown> | undefined): string {
    const adapter = gpu ? { available: gpu.available, name: gpu.name, software: gpu.software } : null;
    return createHash('sha256').update(canonical({ ...what, budget: this.o.budgetBytes ?? null, gpu: adapter })).digest('hex');
  }

  /** Stops the plans in flight and refuses new ones: the app is closing. Each is answered 503 (a documented status: the
   * service is going away), never a 500 for a plan that did nothing wrong. */
  close(): void {
    this.closed = true;
    for (const stop of this.children.values()) stop(new UnavailableError(SHUTTING_DOWN));
    for (const go of this.queue.splice(0)) go();
  }

  onModuleDestroy(): void {
    this.close();
  }

  private slot(signal?: AbortSignal, waitAlways = false): Promise<void> {
    if (this.closed) return Promise.reject(new UnavailableError(SHUTTING_DOWN));
    if (this.running < PLANNER_SLOTS) {
      this.running++;
      return Promise.resolve();
    }
    if (!waitAlways && this.queue.length >= PLANNER_WAITING) {
      return Promise.reject(new QueueFullError(`the planner is busy (${this.running} plan running, ${this.queue.length} waiting); ask again in a moment`));
    }
    return new Promise<void>((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener('abort', gone);
        this.running++;
        resolve();
      };
      const gone = () => {
        const i = this.queue.indexOf(go);
        if (i >= 0) this.queue.splice(i, 1);
        reject(new CancelledError('the client went away'));
      };
      signal?.addEventListener('abort', gone, { once: true });
      this.queue.push(go);
    });
  }

  private run(input: unknown, signal?: AbortSignal): Promise<JobPlan> {
    const script = this.o.script ?? join(__dirname, 'child.js');
    const timeoutMs = this.o.timeoutMs ?? PLAN_TIMEOUT_MS;
    return new Promise<JobPlan>((resolve, reject) => {
      if (signal?.aborted) return reject(new CancelledError('the client went away'));
      if (this.closed) return reject(new UnavailableError(SHUTTING_DOWN));
      const child = spawn(process.execPath, [...process.execArgv.filter((a) => !a.startsWith('--test')), script], { stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      let why: Error | undefined;
      const stop = (e: Error) => {
        why ??= e;
        child.kill('SIGKILL');
      };
      this.children.set(child, stop);
      const timer = setTimeout(() => stop(new UnavailableError(`the plan took longer than ${timeoutMs / 1000} s and was stopped; try a smaller job, or npm run plan on the host`)), timeoutMs);
      const gone = () => stop(new CancelledError('the client went away'));
      signal?.addEventListener('abort', gone, { once: true });
      child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
      child.stderr!.setEncoding('utf8').on('data', (c: string) => (err = (err + c).slice(-4000)));
      child.on('error', (e) => stop(e));
      child.on('close', (code, sig) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', gone);
        this.children.delete(child);
        if (why) return reject(why);
        let answer: { plan?: JobPlan; bad_input?: string; error?: string } | undefined;
        try {
          answer = JSON.parse(out.trim().split('\n').pop() ?? '');
        } catch {
          answer = undefined;
        }
        if (answer?.plan) return resolve(answer.plan);
        if (answer?.bad_input) return reject(new BadInputError(answer.bad_input));
        reject(new Error(`the planner failed: ${answer?.error ?? `exited (${sig ?? `code ${code}`}): ${err.trim().split('\n').slice(-3).join(' ')}`}`));
      });
      child.stdin!.on('error', () => {});
      child.stdin!.end(JSON.stringify(input));
    });
  }
}
