// Pillow's Image.resize(size, Image.LANCZOS) on 8-bit images, bit for bit (libImaging/Resample.c): upstream pipelines
// resize their conditioning images with it (MiniMax H3's keyframes and reference images), and another Lanczos
// (sharp's, a GPU one) moves pixels by a level here and there, which moves the conditioning latents.
//   per axis: scale = in / out, filterscale = max(scale, 1), support = 3 filterscale; output pixel x takes inputs
//   [trunc(c - support + 0.5), trunc(c + support + 0.5)) around c = (x + 0.5) scale, weights
//   lanczos((i - c + 0.5) / filterscale) normalised to sum 1, then fixed point with 22 fraction bits (round half away
//   from zero); horizontal pass first (only the rows the vertical pass reads), each pass rounding to 8 bits
//   ((2^21 + sum) >> 22, clamped), then the vertical pass.

export interface Rgb8Image {
  width: number;
  height: number;
  /** Interleaved channels, row-major: [height, width, channels]. */
  data: Uint8Array;
  channels: number;
}

const PRECISION_BITS = 22;
const SUPPORT = 3.0;

function sinc(x: number): number {
  if (x === 0) return 1;
  const y = x * Math.PI;
  return Math.sin(y) / y;
}

/** Pillow's truncated sinc, on the asymmetric interval [-3, 3). */
function lanczos(x: number): number {
  return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0;
}

interface Coeffs {
  ksize: number;
  /** Per output pixel: first input index and count. */
  bounds: Int32Array;
  /** [out, ksize] fixed-point weights. */
  kk: Int32Array;
}

function precomputeCoeffs(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize; // Pillow: (double)(in1 - in0) / outSize with the box (0, inSize) in float
  const filterscale = Math.max(scale, 1.0);
  const support = SUPPORT * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const kk = new Int32Array(outSize * ksize);
  const k = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1.0 / filterscale;
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    k.fill(0);
    for (let x = 0; x < xmax; x++) {
      const w = lanczos((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (let x = 0; x < xmax; x++) if (ww !== 0) k[x]! /= ww;
    for (let x = 0; x < ksize; x++) {
      const v = k[x]! * (1 << PRECISION_BITS);
      kk[xx * ksize + x] = Math.trunc(k[x]! < 0 ? -0.5 + v : 0.5 + v);
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { ksize, bounds, kk };
}

/** (2^21 + acc) >> 22, clamped to 0..255 (Pillow's clip8 after the rounding bias). */
function clip8(acc: number): number {
  const v = Math.floor(acc / (1 << PRECISION_BITS));
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

/** Image.resize((width, height), Image.LANCZOS) of an 8-bit image. */
export function pilResizeLanczos(src: Rgb8Image, width: number, height: number): Rgb8Image {
  const C = src.channels;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) throw new RangeError(`pilResizeLanczos: ${width}x${height}`);
  if (src.data.length !== src.width * src.height * C) throw new RangeError(`pilResizeLanczos: ${src.data.length} bytes for ${src.width}x${src.height}x${C}`);
  const needH = width !== src.width;
  const needV = height !== src.height;
  if (!needH && !needV) return { ...src, data: Uint8Array.from(src.data) };
  const ch = precomputeCoeffs(src.width, width);
  const cv = precomputeCoeffs(src.height, height);
  const half = 1 << (PRECISION_BITS - 1);
  let img = src;
  if (needH) {
    // only the rows the vertical pass reads: [first, last)
    const first = cv.bounds[0]!;
    const last = cv.bounds[(height - 1) * 2]! + cv.bounds[(height - 1) * 2 + 1]!;
    const rows = last - first;
    const out = new Uint8Array(width * rows * C);
    for (let yy = 0; yy < rows; yy++) {
      const row = (yy + first) * src.width * C;
      for (let xx = 0; xx < width; xx++) {
        const xmin = ch.bounds[xx * 2]!;
        const xmax = ch.bounds[xx * 2 + 1]!;
        const k = xx * ch.ksize;
        for (let c = 0; c < C; c++) {
          let ss = half;
          for (let x = 0; x < xmax; x++) ss += src.data[row + (x + xmin) * C + c]! * ch.kk[k + x]!;
          out[(yy * width + xx) * C + c] = clip8(ss);
        }
      }
    }
    for (let i = 0; i < height; i++) cv.bounds[i * 2]! -= first;
    img = { width, height: rows, data: out, channels: C };
  }
  if (!needV) return img;
  const out = new Uint8Array(img.width * height * C);
  for (let yy = 0; yy < height; yy++) {
    const ymin = cv.bounds[yy * 2]!;
    const ymax = cv.bounds[yy * 2 + 1]!;
    const k = yy * cv.ksize;
    for (let xx = 0; xx < img.width; xx++) {
      for (let c = 0; c < C; c++) {
        let ss = half;
        for (let y = 0; y < ymax; y++) ss += img.data[((y + ymin) * img.width + xx) * C + c]! * cv.kk[k + y]!;
        out[(yy * img.width + xx) * C + c] = clip8(ss);
      }
    }
  }
  return { width: img.width, height, data: out, channels: C };
}

/** Image.crop((left, top, left + width, top + height)) inside the image. */
export function cropImage(src: Rgb8Image, left: number, top: number, width: number, height: number): Rgb8Image {
  if (left < 0 || top < 0 || left + width > src.width || top + height > src.height) throw new RangeError(`cropImage: (${left}, ${top}) ${width}x${height} outside ${src.width}x${src.height}`);
  const C = src.channels;
  const out = new Uint8Array(width * height * C);
  for (let y = 0; y < height; y++) out.set(src.data.subarray(((top + y) * src.width + left) * C, ((top + y) * src.width + left + width) * C), y * width * C);
  return { width, height, data: out, channels: C };
}
