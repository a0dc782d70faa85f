// A job's sampled latents and decoded output checked before anything is written: NaN or infinite values mean the
// model's numbers overflowed (16-bit activations past 65504 that no clamp caught, a corrupt weight), and a file made of
// them is not a result (a png of NaN pixels is all white or all black, a wav of them silence) though it would be
// delivered as one. The job fails instead, saying what was found and what to try. The latents are checked as well as
// the output because a decoder's last clamp turns NaN into a flat colour, finite and wrong.

/** The model's decoded output held NaN or infinite values; nothing was written. */
export class NonFiniteOutputError extends Error {
  override readonly name = 'NonFiniteOutputError';
}

/** Throws NonFiniteOutputError when `data` holds NaN or +-inf. `what` names the output ("the decoded picture");
 * `hint` says what the user can change. O(n) over values the pipeline is about to convert anyway. */
export function assertFiniteOutput(data: Float32Array, what: string, hint: string): void {
  let bad = 0;
  for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i]!)) bad++;
  if (bad === 0) return;
  const share = bad === data.length ? 'all' : `${bad} of ${data.length}`;
  throw new NonFiniteOutputError(`NaN or infinite values in ${what} (${share}): the model's numbers overflowed or a weight is corrupt, so nothing was written; ${hint}`);
}

/** The hint for the image and video models: their 16-bit and int8 profiles compute in f16. */
export const OVERFLOW_HINT = 'try another seed, or the profile\'s 16-bit (bf16/f32) variant where it has one, and check the weight files (npm run weights -- list)';
