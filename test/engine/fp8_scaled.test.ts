// fp8 weights with their scales (src/engine/fp8-scaled.ts): ComfyUI's fp8_scaled files (`<layer>.scale_weight`, a
// `scaled_fp8` marker) and `<layer>.weight_scale` checkpoints, per tensor and per output row, E4M3 and E5M2. The
// reference decodes each fp8 byte from its bit fields here (not through the engine's tables) and multiplies by the
// scale in f32; the checkpoint's F32 view must equal it exactly, and a load to f16 within f16's own rounding (half
// an ulp: relative 2^-11). Refusals name the tensor.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadTensor } from '../../src/engine/load';
import { Checkpoint, CheckpointError } from '../../src/engine/safetensors';
import { writeSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { assertClose, seeded, testEngine, type Rng } from './helpers';

const dir = mkdtempSync(join(tmpdir(), 'kiln-fp8-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An fp8 byte's value from its fields: E4M3FN (bias 7, no infinities, S.1111.111 NaN) or E5M2 (bias 15, IEEE-like). */
function refFp8(b: number, kind: 'E4M3' | 'E5M2'): number {
  const [eBits, mBits, bias] = kind === 'E4M3' ? [4, 3, 7] : [5, 2, 15];
  const sign = b & 0x80 ? -1 : 1;
  const exp = (b >> mBits) & ((1 << eBits) - 1);
  const mant = b & ((1 << mBits) - 1);
  if (exp === 0) return sign * (mant / 2 ** mBits) * 2 ** (1 - bias);
  return sign * (1 + mant / 2 ** mBits) * 2 ** (exp - bias);
}

/** `n` random fp8 bytes that are finite numbers (no NaN or infinity codes). */
function fp8Bytes(rng: Rng, n: number, kind: 'E4M3' | 'E5M2'): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    let b: number;
    do b = rng.int(0, 255);
    while (kind === 'E4M3' ? (b & 0x7f) === 0x7f : ((b >> 2) & 0x1f) === 0x1f);
    out[i] = b;
  }
  return out;
}

const f32 = Math.fround;

test('scaled fp8 weights read as fp8 x scale: per tensor, per row, both fp8 kinds; a plain fp8 tensor as before', seeded(async (rng) => {
  const rows = 37, cols = 29; // rows x cols not a multiple of any chunk size used below
  const a = fp8Bytes(rng, rows * cols, 'E4M3'), b = fp8Bytes(rng, rows * cols, 'E5M2'), c = fp8Bytes(rng, rows * cols, 'E4M3');
  const tensorScale = f32(0.0123);
  const rowScales = Float32Array.from({ length: rows }, () => f32(0.001 + rng.next() * 0.05));
  const path = join(dir, 'scaled.safetensors');
  const tensors: Record<string, WriteTensor> = {
    scaled_fp8: { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) },
    'blocks.0.attn.qkv.weight': { dtype: 'F8_E4M3', shape: [rows, cols], data: a },
    'blocks.0.attn.qkv.scale_weight': { dtype: 'F32', shape: [], data: [tensorScale] },
    'blocks.0.mlp.fc1.weight': { dtype: 'F8_E5M2', shape: [rows, cols], data: b },
    'blocks.0.mlp.fc1.weight_scale': { dtype: 'F32', shape: [rows, 1], data: rowScales },
    'blocks.0.norm.bias': { dtype: 'F8_E4M3', shape: [cols], data: c.subarray(0, cols) }, // a vector: needs no scale
  };
  await writeSafetensors(path, tensors);
  const want = {
    'blocks.0.attn.qkv.weight': Float64Array.from(a, (x) => f32(refFp8(x, 'E4M3') * tensorScale)),
    'blocks.0.mlp.fc1.weight': Float64Array.from(b, (x, i) => f32(refFp8(x, 'E5M2') * rowScales[Math.floor(i / cols)]!)),
  };
  const ck = await Checkpoint.open(path);
  const e = await testEngine();
  try {
    for (const [name, ref] of Object.entries(want)) {
      assert.equal(ck.entry(name).dtype, 'F32', `${name} reads as F32`);
      assertClose(await ck.readFloat32(name), { data: ref, shape: [rows, cols] }, { atol: 0, rtol: 0 }, `${name} (checkpoint, exact)`);
      for (const chunkBytes of [64, 1 << 20]) {
        const t = await loadTensor(e, ck, name, { dtype: 'f16', shape: [rows, cols], chunkBytes });
        try {
          assertClose(await e.read(t), { data: ref, shape: [rows, cols] }, { atol: 2 ** -24, rtol: 2 ** -11 }, `${name} -> f16 in ${chunkBytes}-byte chunks`);
        } finally {
          t.free();
        }
      }
    }
    assert.deepEqual(Array.from(await ck.readFloat32('blocks.0.norm.bias')), Array.from(c.subarray(0, cols), (x) => refFp8(x, 'E4M3')));
  } finally {
    await ck.close();
  }
}));

test('a plain E5M2 tensor (no scale, no marker) decodes as f16\'s top byte', async () => {
  const path = join(dir, 'e5m2.safetensors');
  const bytes = new Uint8Array([0x3c, 0xbc, 0x7b, 0x01, 0x00, 0x80]);
  await writeSafetensors(path, { 'x.weight': { dtype: 'F8_E5M2', shape: [2, 3], data: bytes } });
  const ck = await Checkpoint.open(path);
  try {
    assert.equal(ck.entry('x.weight').dtype, 'F8_E5M2');
    assert.deepEqual(Array.from(await ck.readFloat32('x.weight')), [1, -1, 57344, 2 ** -16, 0, -0]);
  } finally {
    await ck.close();
  }
});

test('refused by name: a scaled_fp8 matrix without its scale, and a scale of the wrong shape', async () => {
  const marker: WriteTensor = { dtype: 'F8_E4M3', shape: [0], data: new Uint8Array(0) };
  const w: WriteTensor = { dtype: 'F8_E4M3', shape: [4, 2], data: new Uint8Array(8).fill(0x38) };
  const noScale = join(dir, 'no-scale.safetensors');
  await writeSafetensors(noScale, { scaled_fp8: marker, 'proj.weight': w });
  await assert.rejects(Checkpoint.open(noScale), (err: Error) => err instanceof CheckpointError && /"proj\.weight" is F8_E4M3 in a scaled_fp8 file but has no scale \(proj\.scale_weight or proj\.weight_scale\)/.test(err.message));
  const badShape = join(dir, 'bad-shape.safetensors');
  await writeSafetensors(badShape, { 'proj.weight': w, 'proj.weight_scale': { dtype: 'F32', shape: [2], data: [1, 2] } });
  await assert.rejects(Checkpoint.open(badShape), (err: Error) => err instanceof CheckpointError && /scale "proj\.weight_scale" of F8_E4M3\[4,2\] "proj\.weight" is \[2\]; expected one value or one per row \(\[4\] or \[4, 1\]\)/.test(err.message));
});
