// Typed errors that cross layer boundaries without importing Nest. One exception filter
// (src/http/http-exception.filter.ts) maps them to the spec's HTTP bodies.

/** The user's input is wrong: HTTP 400 `{"detail": message}`. The message must say what to change,
 * naming the input (e.g. "images[1]: not a png, jpeg, webp or gif image"). */
export class BadInputError extends Error {
  override readonly name = 'BadInputError';
}

/** A resource the user named does not exist: HTTP 404 `{"detail": message}`. */
export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
}

/** Work stopped because the job was cancelled or interrupted (AbortSignal fired). Never a user-visible 500. */
export class CancelledError extends Error {
  override readonly name = 'CancelledError';
  constructor(message = 'cancelled') {
    super(message);
  }
}

/** Throws CancelledError if the signal has fired: the cooperative cancellation check used between steps and stages. */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(typeof signal.reason === 'string' ? signal.reason : 'cancelled');
}

/** The queue holds MAX_QUEUE jobs already: HTTP 429 `{"detail": message}`. */
export class QueueFullError extends Error {
  override readonly name = 'QueueFullError';
}

/** A part the request needs is not available in this build or on this machine: HTTP 503 `{"detail": message}`. */
export class UnavailableError extends Error {
  override readonly name = 'UnavailableError';
}
