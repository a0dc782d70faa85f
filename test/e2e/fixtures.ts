// The reference png the page uploads in the e2e test, made here so its content is known exactly (its wav comes from
// test/api/inputs.ts).
import sharp from 'sharp';

export const REF_SIDE = 64;

/** Reference pixel (x, y): red rises left to right, green top to bottom, blue fixed. */
export function refPixel(x: number, y: number): [number, number, number] {
  return [Math.round((255 * x) / (REF_SIDE - 1)), Math.round((255 * y) / (REF_SIDE - 1)), 60];
}

/** A 64x64 PNG of refPixel. */
export async function gradientPng(): Promise<Buffer> {
  const raw = Buffer.alloc(REF_SIDE * REF_SIDE * 3);
  for (let y = 0; y < REF_SIDE; y++) for (let x = 0; x < REF_SIDE; x++) raw.set(refPixel(x, y), (y * REF_SIDE + x) * 3);
  return sharp(raw, { raw: { width: REF_SIDE, height: REF_SIDE, channels: 3 } }).png().toBuffer();
}
