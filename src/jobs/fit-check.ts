// Jobs that cannot fit the GPU are refused at creation (issue 42): before an image or video job is queued, its plan
// (plan/planner.ts: the same plan dry_run answers, at the released models' sizes) is checked against the budget in force
// (GPU_MEMORY_BUDGET, else the adapter's memory less 5 %), offload included; a job whose peak is over it even so is a
// 400 that names the need, the budget and what to change, never an out-of-memory failure after it was accepted.
//
// Only where the worker serves the profile on its real weights: the plan is of the released model, and the demo
// checkpoints are a few MB (every demo job fits). Where a plan cannot be had (the planner has no plan for this kind of
// job yet, it timed out, it failed), the job is accepted as before and the reason logged: the check never turns a job
// the service could run into an error.
import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../http/tokens';
import { BadInputError, CancelledError } from '../common/errors';
import { fmtBytes } from '../common/bytes';
import { Scheduler } from '../scheduler/scheduler';
import { NEEDS_LESS } from '../plan/needs-less';
import type { PlanRequest } from '../plan/plan';
import { Planner } from '../plan/planner';

@Injectable()
export class FitCheck {
  constructor(
    private readonly planner: Planner,
    private readonly scheduler: Scheduler,
    @Inject(LOGGER) private readonly log: Logger,
  ) {}

  /** Throws a BadInputError when `request` (a PlanRequest the create path has drafted and checked) cannot fit the GPU
   * of the worker that serves `profile` on its real weights. */
  async check(kind: 'image' | 'video', profile: string, request: PlanRequest, signal?: AbortSignal): Promise<void> {
    if (this.scheduler.served(kind, profile)?.weights !== 'real') return;
    let plan;
    try {
      plan = await this.planner.fit({ ...request, kind, profile }, signal);
    } catch (e) {
      if (e instanceof CancelledError) throw e;
      this.log.warn({ kind, profile, err: e instanceof Error ? e.message : String(e) }, 'no plan for the fit check: the job is accepted unchecked');
      return;
    }
    if (plan.fits) return;
    const offload = plan.offload.policy === 'resident' ? '' : ` with ${plan.offload.policy.replace(/\+/g, ' and ')} offload`;
    throw new BadInputError(
      `this ${kind} job does not fit the GPU: by its plan it needs ${fmtBytes(plan.peak_gpu_bytes)} of GPU memory${offload} (stage ${peakStage(plan.stages)}), over the ${fmtBytes(plan.budget_bytes)} budget (GPU_MEMORY_BUDGET, else the GPU's memory less 5 %); ${NEEDS_LESS[kind]} (dry_run: true shows the plan)`,
    );
  }
}

/** The stage where the plan peaks. */
function peakStage(stages: { stage: string; peak_gpu_bytes: number }[]): string {
  return stages.reduce((a, b) => (b.peak_gpu_bytes > a.peak_gpu_bytes ? b : a)).stage;
}
