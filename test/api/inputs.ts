// Small real inputs for API tests, made in-process.
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { wavHeader } from '../../src/media/wav';

export async function pngBytes(width = 64, height = 48): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 10 } } }).png().toBuffer();
}

/** Width and height from a png's IHDR, after checking the signature (a job's output is a real png). */
export function pngSize(buf: Buffer): { width: number; height: number } {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'png signature');
  assert.equal(buf.subarray(12, 16).toString(), 'IHDR');
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

/** 16-bit mono PCM wav of an `hz` tone (440 Hz unless told). */
export function wavBytes(seconds: number, rate = 16000, hz = 440): Buffer {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / rate)), i * 2);
  return Buffer.concat([wavHeader(rate, 1, n), data]);
}

export const dataUri = (mime: string, bytes: Buffer) => `data:${mime};base64,${bytes.toString('base64')}`;

/** 16-bit stereo PCM wav at `rate`: a `leftHz` tone on the left, a `rightHz` tone on the right (channels told apart). */
export function stereoWavBytes(seconds: number, rate = 44100, leftHz = 440, rightHz = 660): Buffer {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) {
    data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * leftHz * i) / rate)), i * 4);
    data.writeInt16LE(Math.round(6000 * Math.sin((2 * Math.PI * rightHz * i) / rate)), 2 + i * 4);
  }
  return Buffer.concat([wavHeader(rate, 2, n), data]);
}

/** Pearson correlation of two interleaved signals over their first `n` values (the overlap by default). */
export function correlation(a: Float32Array, b: Float32Array, n = Math.min(a.length, b.length)): number {
  let sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    const y = b[i]!;
    sa += x; sb += y; sab += x * y; saa += x * x; sbb += y * y;
  }
  const cov = sab / n - (sa / n) * (sb / n);
  return cov / Math.sqrt((saa / n - (sa / n) ** 2) * (sbb / n - (sb / n) ** 2));
}
