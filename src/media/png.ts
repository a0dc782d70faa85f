// Image out: png via sharp, with the generation parameters recorded in PNG text chunks so a user
// (or another tool) can reproduce the image. sharp cannot write arbitrary text chunks, so they are
// spliced in after IHDR. Chunks written:
//   parameters  A1111-style text ("<prompt>\nNegative prompt: ...\nSteps: 25, CFG scale: 1, Seed: 7, Size: 1024x1024, Model: imgmain")
//               which common image viewers and generator UIs already parse
//   kiln        the same parameters as exact JSON (machine-readable; readPngParameters)
//   Software    "Kiln"
// ASCII values go in tEXt; anything else (e.g. a Chinese prompt) in uncompressed iTXt (UTF-8),
// because tEXt is Latin-1 only.
import { inflateSync } from 'node:zlib';
import sharp from 'sharp';
import { BadInputError, CancelledError } from '../common/errors';
import { abortReason } from './ffmpeg';
import { writeFileAtomic } from './files';
import { tensorToRgb8, type FloatRange, type RgbImage } from './pixels';
import type { ImageTensor } from './types';

/** What an image job records. prompt, profile, seed and steps are required; anything else is kept too. */
export interface PngParameters {
  prompt: string;
  profile: string;
  seed: number;
  steps: number;
  negative_prompt?: string;
  cfg?: number;
  [key: string]: string | number | boolean | null | undefined;
}

export interface WritePngOptions {
  /** Scale of float tensors: [-1, 1] ('signed', default) or [0, 1] ('unit'). */
  floatRange?: FloatRange;
  /** zlib level 0-9; 6 (default) is within a few percent of 9 at a fraction of the time on 2K images. */
  compressionLevel?: number;
  signal?: AbortSignal;
}

const PNG_SIG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Encodes `image` (CHW float tensor `[3, H, W]`, or 8-bit HWC RGB) as png with `params` in text chunks and writes it
 * to `path` through a temp sibling and rename. Throws CancelledError if `signal` fires; Error for a malformed image.
 */
export async function writePng(path: string, image: ImageTensor | RgbImage, params: PngParameters, opts: WritePngOptions = {}): Promise<void> {
  const png = await encodePng(image, params, opts);
  await writeFileAtomic(path, [png], opts.signal);
}

/** The png file as bytes (what writePng writes). */
export async function encodePng(image: ImageTensor | RgbImage, params: PngParameters, opts: WritePngOptions = {}): Promise<Buffer> {
  if (opts.signal?.aborted) throw new CancelledError(abortReason(opts.signal));
  const rgb = 'shape' in image ? tensorToRgb8(image, opts.floatRange ?? 'signed') : image;
  if (rgb.data.length !== rgb.width * rgb.height * 3) {
    throw new Error(`writePng: ${rgb.data.length} bytes for ${rgb.width}x${rgb.height} RGB`);
  }
  const encoded = await sharp(rgb.data, { raw: { width: rgb.width, height: rgb.height, channels: 3 } })
    .png({ compressionLevel: opts.compressionLevel ?? 6 })
    .timeout({ seconds: 120 })
    .toBuffer();
  if (opts.signal?.aborted) throw new CancelledError(abortReason(opts.signal));
  const size = `${rgb.width}x${rgb.height}`;
  return insertTextChunks(encoded, [
    ['parameters', formatParameters(params, size)],
    ['kiln', JSON.stringify({ ...params, size: params.size ?? size })],
    ['Software', 'Kiln'],
  ]);
}

/** A1111's layout: prompt, optional negative prompt line, then "Key: value" pairs. */
export function formatParameters(p: PngParameters, size: string): string {
  const pairs: [string, unknown][] = [['Steps', p.steps]];
  if (p.cfg !== undefined) pairs.push(['CFG scale', p.cfg]);
  pairs.push(['Seed', p.seed], ['Size', p.size ?? size], ['Model', p.profile]);
  const known = new Set(['prompt', 'negative_prompt', 'steps', 'cfg', 'seed', 'size', 'profile']);
  for (const [k, v] of Object.entries(p)) if (!known.has(k) && v !== undefined && v !== null) pairs.push([k, v]);
  // Values containing the separators are JSON-quoted, as A1111 does.
  const fmt = (v: unknown) => {
    const s = String(v);
    return /[,:\n]/.test(s) ? JSON.stringify(s) : s;
  };
  const lines = [p.prompt];
  if (p.negative_prompt) lines.push(`Negative prompt: ${p.negative_prompt}`);
  lines.push(pairs.map(([k, v]) => `${k}: ${fmt(v)}`).join(', '));
  return lines.join('\n');
}

/** Inserts tEXt/iTXt chunks right after IHDR (before IDAT, so readers that stop early still see them). */
export function insertTextChunks(png: Buffer, entries: [string, string][]): Buffer {
  if (png.length < 33 || !png.subarray(0, 8).equals(PNG_SIG) || png.toString('latin1', 12, 16) !== 'IHDR') {
    throw new Error('insertTextChunks: input is not a png starting with IHDR');
  }
  const ihdrEnd = 8 + 12 + png.readUInt32BE(8);
  const chunks = entries.map(([k, v]) => textChunk(k, v));
  return Buffer.concat([png.subarray(0, ihdrEnd), ...chunks, png.subarray(ihdrEnd)]);
}

function textChunk(keyword: string, text: string): Buffer {
  if (!/^[\x20-\x7e]{1,79}$/.test(keyword) || keyword !== keyword.trim()) throw new Error(`png text keyword ${JSON.stringify(keyword)} is not valid`);
  const key = Buffer.from(keyword, 'latin1');
  if (/^[\x20-\x7e\n]*$/.test(text)) return chunk('tEXt', Buffer.concat([key, Buffer.from([0]), Buffer.from(text, 'latin1')]));
  // iTXt: keyword\0 compression-flag(0) method(0) language-tag\0 translated-keyword\0 UTF-8 text
  return chunk('iTXt', Buffer.concat([key, Buffer.from([0, 0, 0, 0, 0]), Buffer.from(text, 'utf8')]));
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 as PNG chunks use it (ISO 3309). */
export function crc32(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * All text chunks of a png (tEXt, zTXt, iTXt, compressed or not), keyword to text; later duplicates win.
 * Throws BadInputError if `png` is not a png or its chunk structure is broken.
 */
export function readPngText(png: Buffer, label = 'image'): Record<string, string> {
  if (png.length < 8 || !png.subarray(0, 8).equals(PNG_SIG)) throw new BadInputError(`${label}: not a png file`);
  const out: Record<string, string> = {};
  let off = 8;
  while (off + 12 <= png.length) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const end = off + 12 + len;
    if (end > png.length) throw new BadInputError(`${label}: png chunk ${type} runs past the end of the file`);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IEND') break;
    try {
      if (type === 'tEXt') {
        const z = data.indexOf(0);
        out[data.toString('latin1', 0, z)] = data.toString('latin1', z + 1);
      } else if (type === 'zTXt') {
        const z = data.indexOf(0);
        out[data.toString('latin1', 0, z)] = inflateSync(data.subarray(z + 2)).toString('latin1');
      } else if (type === 'iTXt') {
        const z = data.indexOf(0);
        const compressed = data[z + 1] === 1;
        const langEnd = data.indexOf(0, z + 3);
        const transEnd = data.indexOf(0, langEnd + 1);
        const body = data.subarray(transEnd + 1);
        out[data.toString('latin1', 0, z)] = (compressed ? inflateSync(body) : body).toString('utf8');
      }
    } catch {
      throw new BadInputError(`${label}: png ${type} chunk is malformed`);
    }
    off = end;
  }
  return out;
}

/** The exact parameters Kiln recorded (the `kiln` JSON chunk), or undefined if the png has none. */
export function readPngParameters(png: Buffer, label = 'image'): PngParameters | undefined {
  const text = readPngText(png, label).kiln;
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as PngParameters;
  } catch {
    throw new BadInputError(`${label}: png kiln chunk is not valid JSON`);
  }
}
