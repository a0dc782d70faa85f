// Step caching for basevid50_sol: the sampler reuses the previous step's velocity instead of running the
// transformer where the velocity has been changing slowly (docs/models/minimax-h3.md "Profiles").
// H3's attention is fully bidirectional and every row (text included) is modulated by the step's timestep, so
// no per-row K/V is step-invariant: caching happens at the level of whole forwards, never inside attention.

/** When the sampler may skip a forward and reuse the last computed velocity. */
export interface StepCachePolicy {
  /** Leading forwards always computed (the layout of the clip forms there). */
  warmup: number;
  /** Trailing forwards always computed (fine detail). */
  tail: number;
  /** Reuse only while the relative change of the velocity between the last two computed steps is below this. */
  threshold: number;
  /** At most this many reuses in a row before a forward is computed again. */
  maxConsecutive: number;
}

/** basevid50_sol's policy (measured in docs/models/minimax-h3.md). */
export const SOL_STEP_CACHE: StepCachePolicy = { warmup: 6, tail: 4, threshold: 0.1, maxConsecutive: 1 };
