// Input files the page uploads in the e2e test, made here so their content is known exactly.
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

/** A mono 16-bit PCM wav of `seconds` of a 220 Hz tone. */
export function toneWav(seconds: number, rate = 16000): Buffer {
  const n = Math.round(seconds * rate);
  const buf = Buffer.alloc(44 + n * 2);
  buf.write('RIFF', 0);
  buf.writeUInt32LE(36 + n * 2, 4);
  buf.write('WAVEfmt ', 8);
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(rate, 24);
  buf.writeUInt32LE(rate * 2, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36);
  buf.writeUInt32LE(n * 2, 40);
  for (let i = 0; i < n; i++) buf.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / rate)), 44 + i * 2);
  return buf;
}
