// Krea 2's sampling schedule (krea-ai/krea-2 sampling.timesteps, the loop of sampling.sample):
//   t_i   = linspace(1, 0, N + 1)                                          (float32)
//   mu    = given (Turbo: 1.15, the value the distilled checkpoint was trained at), or interpolated linearly in the
//           image token count between (x1, y1) and (x2, y2) (Raw: x = (minres / 16)^2 = 256 .. (maxres / 16)^2 = 6400,
//           y = 0.5 .. 1.15)
//   sigma = e^mu / (e^mu + (1 / t - 1)^s)                                  (float32 tensor ops; s = 1; t = 0 gives 0)
//           (torch computes scalar / tensor as tensor.reciprocal() * scalar; so does this)
//   step  x <- x + (sigma_{i+1} - sigma_i) v                              (the difference in float64, as Python floats)
// The model is evaluated at sigma_i itself (its timestep embedding multiplies by 1000). Every float32 operation of
// upstream's tensor arithmetic is rounded here too, so the values match to the last bit or within an ulp.

/** Turbo's fixed shift (krea-ai/krea-2 README command and the timesteps docstring). */
export const KREA2_TURBO_MU = 1.15;
/** The Turbo profile's step count (8 model evaluations, no CFG). */
export const KREA2_TURBO_STEPS = 8;

export interface Krea2ScheduleOptions {
  /** A fixed shift (Turbo). Without it, mu is interpolated from seqLen. */
  mu?: number;
  /** Image tokens (for the interpolated mu). */
  seqLen?: number;
  x1?: number;
  x2?: number;
  y1?: number;
  y2?: number;
  /** Exponent of the shift (1). */
  sigma?: number;
}

/** torch.linspace(1, 0, n + 1) in float32: the first half counts up from the start, the rest down from the end. */
function linspace10(n: number): number[] {
  const f = Math.fround;
  const steps = n + 1;
  const step = f((0 - 1) / n);
  const half = Math.floor(steps / 2);
  return Array.from({ length: steps }, (_, i) => (i < half ? f(1 + f(step * i)) : f(0 - f(step * (steps - 1 - i)))));
}

/** The N + 1 sigmas, from 1 to 0. */
export function krea2Sigmas(steps: number, o: Krea2ScheduleOptions = {}): number[] {
  if (!Number.isInteger(steps) || steps < 1) throw new RangeError(`krea2Sigmas: steps ${steps} must be a positive integer`);
  let mu = o.mu;
  if (mu === undefined) {
    const { seqLen, x1 = 256, x2 = 6400, y1 = 0.5, y2 = 1.15 } = o;
    if (seqLen === undefined) throw new RangeError('krea2Sigmas: give mu, or seqLen to interpolate it');
    const slope = (y2 - y1) / (x2 - x1);
    mu = slope * seqLen + (y1 - slope * x1);
  }
  const s = o.sigma ?? 1;
  const f = Math.fround;
  const em = f(Math.exp(mu));
  return linspace10(steps).map((t) => {
    const a = f(f(f(1 / t) - 1) ** s);
    return f(f(1 / f(em + a)) * em); // scalar / tensor is tensor.reciprocal() * scalar in torch
  });
}

/** Python's tprev - tcurr for step i (float64 difference of the float32 sigmas). */
export function krea2StepSize(sigmas: readonly number[], i: number): number {
  return sigmas[i + 1]! - sigmas[i]!;
}
