// The spec's size tables (service-api.md "Reference tables") and the rules derived from them.

export const VIDEO_ASPECTS = ['16:9', '9:16', '1:1'] as const;
export const VIDEO_RES = ['352p', '480p', '768p'] as const;
export const IMAGE_ASPECTS = ['1:1', '16:9', '9:16', '4:3', '3:4'] as const;
export const IMAGE_RES = ['1K', '2K'] as const;

/** Video pixel sizes [width, height], all multiples of 32. */
export const VIDEO_SIZES: Record<string, Record<string, [number, number]>> = {
  '16:9': { '352p': [608, 352], '480p': [864, 480], '768p': [1344, 768] },
  '9:16': { '352p': [352, 608], '480p': [480, 864], '768p': [768, 1344] },
  '1:1': { '352p': [480, 480], '480p': [672, 672], '768p': [1024, 1024] },
};

/** Image pixel sizes [width, height]: 1K about 1 megapixel, 2K about 4. */
export const IMAGE_SIZES: Record<string, Record<string, [number, number]>> = {
  '1:1': { '1K': [1024, 1024], '2K': [2048, 2048] },
  '16:9': { '1K': [1344, 768], '2K': [2752, 1536] },
  '9:16': { '1K': [768, 1344], '2K': [1536, 2752] },
  '4:3': { '1K': [1152, 864], '2K': [2304, 1728] },
  '3:4': { '1K': [864, 1152], '2K': [1728, 2304] },
};

/** An explicit image `size`: both sides multiples of 32 within [min, max]. */
export const EXPLICIT_SIZE = { multiple_of: 32, min: 256, max: 4096 } as const;

/** Scales a w x h picture to about `tier` pixels (1K = 1024^2, 2K = 2048^2), keeping aspect, sides multiples of 32. */
export function sizeForTier(w: number, h: number, res: string): [number, number] {
  const area = res === '2K' ? 2048 * 2048 : 1024 * 1024;
  const scale = Math.sqrt(area / (w * h));
  const { multiple_of: m, min, max } = EXPLICIT_SIZE;
  const snap = (v: number) => Math.min(max, Math.max(min, Math.round((v * scale) / m) * m));
  return [snap(w), snap(h)];
}

/** Smallest whole-number ratio, e.g. 1280x720 -> "16:9". */
export function aspectOf(w: number, h: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}
