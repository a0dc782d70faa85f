// Checkpoint conversion on the GPU at load (issue 44): shaders/convert.wgsl against the CPU conversion it replaces
// (dtype.ts bf16ToF16Table and f32ToF16Bits, what load.ts readConverted does), bit for bit on every BF16 pattern and on
// fresh random F32 patterns weighted to the edges (subnormal halves, halfway cases, f16's top, ±0, ±inf, NaN, f32
// subnormals, overflow), odd element counts and offsets; then loadTensor's GPU path against its CPU path on the same
// files (many chunks, odd tails, the overflow refusal, staging one chunk wide) and on every tensor of the committed
// demo checkpoints. Compared as raw bits read back, never as decoded numbers.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { bf16ToF16Table, F16_OVERFLOW, f32ToF16Bits } from '../../src/engine/dtype';
import type { Engine } from '../../src/engine/engine';
import { CONVERT_PIECE_BYTES, loadTensor, type LoadOptions } from '../../src/engine/load';
import { convertInto, overflowedValue, overflowStatus, type GpuConversion } from '../../src/engine/ops/convert';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeSafetensors } from '../../src/engine/safetensors-writer';
import type { Tensor } from '../../src/engine/tensor';
import { BufferUsage, MapMode } from '../../src/engine/webgpu';
import { repoRoot } from '../models/golden';
import { seeded, testEngine, type Rng } from './helpers';

const dir = mkdtempSync(join(tmpdir(), 'kiln-convert-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The tensor's storage bytes as they are on the GPU (its numel elements). */
async function readBits(e: Engine, t: Tensor): Promise<Uint8Array> {
  const bytes = t.numel * t.bytesPerElement;
  const size = Math.max(4, Math.ceil(bytes / 4) * 4);
  const staging = e.device.createBuffer({ size, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: 'read bits' });
  try {
    e.recorder.copy(t.storage.buffer, t.offset * t.bytesPerElement, staging, 0, size);
    await e.recorder.sync();
    await staging.mapAsync(MapMode.READ);
    return new Uint8Array(staging.getMappedRange()).slice(0, bytes);
  } finally {
    staging.destroy();
  }
}

const hex = (v: number, w = 4) => `0x${v.toString(16).padStart(w, '0')}`;

/** Random F32 bit patterns, most near f16's edges: exponents around its range, mantissas with halfway tails. */
function f32Patterns(rng: Rng, n: number): Uint32Array {
  const out = new Uint32Array(n);
  const special = [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x00000001, 0x807fffff,
    0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000, 0x477fffff, 0x33800000, 0x33000000, 0x33000001, 0xb3000000, 0x387fe000, 0x387ff000, 0x38800000];
  for (let i = 0; i < n; i++) {
    if (i < special.length) {
      out[i] = special[i]!;
      continue;
    }
    const sign = rng.next() < 0.5 ? 0x80000000 : 0;
    const r = rng.next();
    // exponents 100..145 cover f16's subnormals (below 113), normals and overflow (143 up)
    const exp = r < 0.8 ? rng.int(100, 145) : rng.int(0, 255);
    let mant = rng.int(0, 0x7fffff);
    if (rng.next() < 0.3) mant = (mant & ~0x1fff) | 0x1000; // halfway for a normal half
    if (rng.next() < 0.1) mant &= ~((1 << rng.int(13, 23)) - 1) | (1 << rng.int(12, 22)); // halfway-ish for a subnormal one
    out[i] = (sign | (exp << 23) | mant) >>> 0;
  }
  return out;
}

/** Runs convertInto on `words` (the file bytes) into a fresh out tensor at `outOffset`; returns the bits and the status. */
async function runKernel(e: Engine, conv: GpuConversion, file: Uint8Array, n: number, outOffset: number): Promise<{ bits: Uint8Array; over: number | null }> {
  const src = e.empty([Math.max(1, Math.ceil(file.byteLength / 4))], 'f32', 'file bytes');
  const out = e.empty([outOffset + n], conv === 'BF16->f32' ? 'f32' : 'f16');
  const status = overflowStatus(e);
  try {
    const padded = new Uint8Array(Math.ceil(file.byteLength / 4) * 4);
    padded.set(file);
    e.writeBytes(src, 0, padded);
    convertInto(e, conv, src, n, out, outOffset, status);
    const all = await readBits(e, out);
    return { bits: all.subarray(outOffset * out.bytesPerElement), over: conv === 'BF16->f32' ? null : await overflowedValue(e, status) };
  } finally {
    src.free();
    out.free();
    status.free();
  }
}

test('BF16 -> f16: every one of the 65,536 patterns gives the CPU table\'s half; overflow is ±inf and reported', seeded(async (rng) => {
  const e = await testEngine();
  const table = bf16ToF16Table();
  // all patterns in a random order, an odd count (the last one alone in its word), at an even offset
  const order = Uint16Array.from({ length: 65536 }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const n = 65535;
  const { bits, over } = await runKernel(e, 'BF16->f16', new Uint8Array(order.buffer, 0, n * 2), n, 2 * rng.int(0, 50));
  const got = new Uint16Array(bits.buffer, bits.byteOffset, n);
  let overflowed = 0;
  let largest = 0;
  for (let i = 0; i < n; i++) {
    const b = order[i]!;
    let want = table[b]!;
    if ((want & 0x7fff) === F16_OVERFLOW) {
      want = (want & 0x8000) | 0x7c00; // the CPU marks it to refuse the tensor; the kernel writes ±inf and reports it
      overflowed++;
      if (!(b & 0x8000)) largest = Math.max(largest, b);
    }
    if (got[i] !== want) assert.fail(`bf16 ${hex(b)}: GPU ${hex(got[i]!)}, CPU ${hex(want)}`);
  }
  assert.ok(overflowed > 1000, `${overflowed} patterns overflow f16`);
  // the report: the largest positive value beyond f16's range among those converted
  const f = new Float32Array(new Uint32Array([largest << 16]).buffer)[0]!;
  assert.equal(over, f);
}));

test('F32 -> f16: fresh random patterns at f16\'s edges give f32ToF16Bits\'s half, odd counts and offsets', seeded(async (rng) => {
  const e = await testEngine();
  for (const n of [1, 3, 4097, 20001]) {
    const words = f32Patterns(rng, n);
    const off = 2 * rng.int(0, 20);
    const { bits, over } = await runKernel(e, 'F32->f16', new Uint8Array(words.buffer), n, off);
    const got = new Uint16Array(bits.buffer, bits.byteOffset, n);
    const values = new Float32Array(words.buffer);
    let worst = 0;
    let worstNeg = 0;
    for (let i = 0; i < n; i++) {
      const want = f32ToF16Bits(values[i]!);
      const finite = (words[i]! & 0x7f800000) !== 0x7f800000;
      if (finite && (want & 0x7fff) === 0x7c00) {
        if (words[i]! >>> 31) worstNeg = Math.max(worstNeg, words[i]! & 0x7fffffff);
        else worst = Math.max(worst, words[i]!);
      }
      if (got[i] !== want) assert.fail(`n ${n}, f32 ${hex(words[i]!, 8)} (${values[i]}): GPU ${hex(got[i]!)}, CPU ${hex(want)}`);
    }
    const asF32 = (w: number) => new Float32Array(new Uint32Array([w]).buffer)[0]!;
    assert.equal(over, worst ? asF32(worst) : worstNeg ? -asF32(worstNeg) : null, `n ${n}: the reported overflow`);
  }
}));

test('BF16 -> f32: every pattern is the top half of its f32, odd counts and offsets', seeded(async (rng) => {
  const e = await testEngine();
  for (const n of [1, 7, 65536]) {
    const src = Uint16Array.from({ length: n }, (_, i) => (n === 65536 ? i : rng.int(0, 0xffff)));
    const off = rng.int(0, 9);
    const { bits } = await runKernel(e, 'BF16->f32', new Uint8Array(src.buffer), n, off);
    const got = new Uint32Array(bits.buffer.slice(bits.byteOffset, bits.byteOffset + n * 4));
    for (let i = 0; i < n; i++) if (got[i] !== (src[i]! << 16) >>> 0) assert.fail(`bf16 ${hex(src[i]!)}: GPU ${hex(got[i]!, 8)}`);
  }
}));

test('the kernel refuses what it cannot write: an odd f16 offset, an out of the wrong dtype, no status, an overrun', async () => {
  const e = await testEngine();
  const src = e.empty([8], 'f32');
  const h = e.empty([16], 'f16');
  const status = overflowStatus(e);
  try {
    assert.throws(() => convertInto(e, 'BF16->f16', src, 4, h, 1, status), /offset 1 must be even/);
    assert.throws(() => convertInto(e, 'BF16->f32', src, 4, h, 0), /out f16\[16\] must be a contiguous f32/);
    assert.throws(() => convertInto(e, 'F32->f16', src, 4, h, 0), /needs a 16-byte status/);
    assert.throws(() => convertInto(e, 'F32->f16', src, 9, h, 0, status), /9 elements \(36 bytes\) overrun src/);
    assert.throws(() => convertInto(e, 'BF16->f16', src, 16, h, 2, status), /16 values at 2 overrun/);
  } finally {
    src.free();
    h.free();
    status.free();
  }
});

/** Loads `name` both ways and returns the two tensors' bits (or both errors' messages). */
async function bothWays(e: Engine, ck: Checkpoint, name: string, opts: LoadOptions): Promise<[Uint8Array | string, Uint8Array | string]> {
  const load = async (convertOn: 'cpu' | 'gpu') => {
    try {
      const t = await loadTensor(e, ck, name, { ...opts, convertOn });
      try {
        return await readBits(e, t);
      } finally {
        t.free();
      }
    } catch (err) {
      return (err as Error).message;
    }
  };
  return [await load('cpu'), await load('gpu')];
}

function assertSameBits(cpu: Uint8Array | string, gpu: Uint8Array | string, label: string): void {
  if (typeof cpu === 'string' || typeof gpu === 'string') return assert.equal(gpu, cpu, `${label}: the same outcome`);
  assert.equal(gpu.byteLength, cpu.byteLength, label);
  const i = gpu.findIndex((b, k) => b !== cpu[k]);
  if (i >= 0) assert.fail(`${label}: byte ${i} differs (GPU ${gpu[i]}, CPU ${cpu[i]})`);
}

test('loadTensor: the GPU conversion loads the CPU path\'s bits in many chunks with odd tails, and refuses overflow the same way', seeded(async (rng) => {
  const e = await testEngine();
  const path = join(dir, 'convert.safetensors');
  const normal = (n: number, scale: number) => Float32Array.from(rng.normal(n, scale));
  await writeSafetensors(path, {
    bf: { dtype: 'BF16', shape: [3, 1001], data: normal(3003, 2) },
    bfTiny: { dtype: 'BF16', shape: [999], data: normal(999, 2 ** -18) }, // f16 subnormals
    f32: { dtype: 'F32', shape: [2, 2049], data: normal(4098, 1000) },
    one: { dtype: 'BF16', shape: [1], data: [1.5] },
    bfBig: { dtype: 'BF16', shape: [CONVERT_PIECE_BYTES / 2 + 2 ** 18 + 1], data: normal(CONVERT_PIECE_BYTES / 2 + 2 ** 18 + 1, 3) },
    empty: { dtype: 'BF16', shape: [0, 4], data: [] },
    bigbf: { dtype: 'BF16', shape: [7], data: [1, 2, -1e6, 3, 4, 5, 6] },
    big32: { dtype: 'F32', shape: [5], data: [1, 7e4, 2, 3, 4] },
  });
  const ck = await Checkpoint.open(path);
  try {
    for (const name of ['bf', 'bfTiny', 'f32', 'one', 'empty']) {
      for (const dtype of ['f16', 'f32'] as const) {
        for (const chunkBytes of [8, 96, 4000, 2 ** 20]) {
          const [cpu, gpu] = await bothWays(e, ck, name, { dtype, chunkBytes });
          assert.ok(typeof cpu !== 'string', `${name} -> ${dtype} loads: ${cpu as string}`);
          assertSameBits(cpu, gpu, `${name} -> ${dtype}, ${chunkBytes}-byte chunks`);
        }
      }
    }
    await assert.rejects(loadTensor(e, ck, 'bigbf', { dtype: 'f16', convertOn: 'gpu', chunkBytes: 8 }), /"bigbf" holds -999424, beyond f16's range \(65504\); load it as f32/);
    await assert.rejects(loadTensor(e, ck, 'big32', { dtype: 'f16', convertOn: 'gpu' }), /"big32" holds 70000, beyond f16's range/);
    // the staging tensor is one chunk wide, whatever the tensor's size: in use at once, the tensor, one chunk, the status
    e.pool.resetPeaks();
    const before = e.pool.stats().inUseBytes;
    const t = await loadTensor(e, ck, 'f32', { dtype: 'f16', convertOn: 'gpu', chunkBytes: 1024 });
    const peak = e.pool.stats().peakInUseBytes - before;
    const held = t.storage.pooled.size;
    t.free();
    // the pool's size classes: the tensor's, two 1 KiB staging buffers, the status's smallest class (256 B)
    assert.ok(peak <= held + 2 * 1024 + 256, `peak ${peak} bytes in use for an 8 KiB tensor (${held} B held) read in 1 KiB chunks`);
    // a tensor over one upload piece (CONVERT_PIECE_BYTES): chunks cut into pieces, a chunk size that is not a
    // multiple of the piece, an odd tail
    for (const dtype of ['f16', 'f32'] as const) {
      for (const chunkBytes of [1.25 * 2 ** 20, 8 * 2 ** 20]) {
        const [cpu, gpu] = await bothWays(e, ck, 'bfBig', { dtype, chunkBytes });
        assertSameBits(cpu, gpu, `bfBig -> ${dtype}, ${chunkBytes}-byte chunks`);
      }
    }
  } finally {
    await ck.close();
  }
}));

test('loadTensor: a tensor over the binding limit is refused before its bytes are read, on either path', async () => {
  const e = await testEngine();
  const limit = e.gpu.maxBindingBytes;
  const path = join(dir, 'huge.safetensors');
  // BF16 -> f32 doubles the bytes: a file tensor of half the limit plus a bit needs one binding over it
  const n = limit / 4 + 1024;
  const { open } = await import('node:fs/promises');
  const header = JSON.stringify({ huge: { dtype: 'BF16', shape: [n], data_offsets: [0, n * 2] } });
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  const h = await open(path, 'w');
  await h.write(Buffer.concat([len, Buffer.from(header)]));
  await h.truncate(8 + header.length + n * 2); // a sparse file: no bytes are read before the refusal
  await h.close();
  const ck = await Checkpoint.open(path);
  try {
    for (const convertOn of ['gpu', 'cpu'] as const) {
      await assert.rejects(loadTensor(e, ck, 'huge', { dtype: 'f32', convertOn }), /in one binding, over the .* this adapter allows; split it/);
    }
  } finally {
    await ck.close();
  }
});

test('every tensor of the committed demo checkpoints loads to the same bits on the GPU path as on the CPU path', async () => {
  const e = await testEngine();
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d, { withFileTypes: true })) {
      if (f.isDirectory()) walk(join(d, f.name));
      else if (f.name.endsWith('.safetensors')) files.push(join(d, f.name));
    }
  };
  walk(join(repoRoot(), 'assets', 'demo'));
  assert.ok(files.length >= 10, `${files.length} demo files`);
  let compared = 0;
  for (const file of files) {
    const ck = await Checkpoint.open(file);
    try {
      for (const name of ck.keys()) {
        const entry = ck.entry(name);
        if (entry.dtype !== 'BF16' && entry.dtype !== 'F32') continue;
        for (const dtype of ['f16', 'f32'] as const) {
          if (entry.dtype === 'F32' && dtype === 'f32') continue; // the same bits, no conversion
          const [cpu, gpu] = await bothWays(e, ck, name, { dtype });
          assertSameBits(cpu, gpu, `${file}: ${name} -> ${dtype}`);
          compared++;
        }
      }
    } finally {
      await ck.close();
    }
  }
  assert.ok(compared > 100, `${compared} tensors compared`);
});
