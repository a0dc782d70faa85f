/** Python's round(x): the nearest integer, halves to the even neighbour (round(2.5) = 2, round(3.5) = 4). Upstream
 * sizes and lengths are computed with it (transformers' smart_resize, diffusers' calculate_dimensions, MiniMax H3's
 * audio latent count), so a plain Math.round would differ from upstream exactly at the halves. */
export function pythonRound(x: number): number {
  const f = Math.floor(x);
  if (x - f !== 0.5) return Math.round(x);
  return f % 2 === 0 ? f : f + 1;
}
