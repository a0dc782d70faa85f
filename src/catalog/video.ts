// Time in a video: the frame rate, the model's frame grid and the seconds a request may ask for.

/** Frames per second of every video (the model's rate; the mp4 is written at exactly this rate). */
export const FPS = 24;

/** MiniMax H3's video VAE encodes 17-frame chunks after a 5-frame head: frame counts are 17k + 5. */
export const FRAME_GRID = { period: 17, offset: 5 } as const;

/** The smallest frame count on the grid that is at least `frames` (at least one head: 5). */
export function alignFrames(frames: number): number {
  const k = Math.max(0, Math.ceil((frames - FRAME_GRID.offset) / FRAME_GRID.period));
  return FRAME_GRID.period * k + FRAME_GRID.offset;
}

/** Frames for a clip: seconds at 24 fps rounded up to the model grid 17k+5 (5 s -> 124 frames). */
export function snapFrames(seconds: number): number {
  return alignFrames(Math.ceil(seconds * FPS - 1e-9));
}

/** A video request's `seconds`, and the choices the web page offers. */
export const VIDEO_SECONDS = { min: 1, max: 15, default: 5, options: [1, 2, 3, 4, 5, 6, 8, 10, 12, 15] } as const;
