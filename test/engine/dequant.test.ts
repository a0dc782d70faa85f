// GGUF (issue 44): the CPU dequantiser (src/engine/gguf.ts) against gguf-py's own dequantisation of random blocks
// (test/fixtures/golden/gguf/dequant.json, tools/golden/gguf_dequant.py), the WGSL kernels (shaders/dequant.wgsl)
// against the CPU on fresh random blocks of every type, and a .gguf file as a Checkpoint: its tensors under their own
// names in PyTorch's dimension order, F32/F16/BF16 as stored, quantised ones dequantised on the CPU (readFloat32) and
// on the GPU at load (loadTensor), unreadable types and truncated files refused by name.
//
// Tolerance, GPU against CPU: both compute in float32 step for step; a driver may contract a * b + c into one fused
// multiply-add and round once less, so a value may differ by up to one f32 rounding of its largest term:
// |gpu - cpu| <= 2^-22 * (|cpu| + |the block's scale terms|), bounded here by 2^-22 * max |cpu| of the tensor. f16
// outputs: the f32 result rounded once to f16, so within one f16 ulp (2^-10 relative) of the CPU value rounded to f16.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { f32ToF16Bits, roundToDType } from '../../src/engine/dtype';
import { dequantize as cpuDequant, GGML_QUANTS, GGML_TYPES, ggufBytes, type GgmlQuant } from '../../src/engine/gguf';
import { loadTensor } from '../../src/engine/load';
import { dequantInto, dequantize, wholeWords } from '../../src/engine/ops/dequant';
import { Checkpoint, CheckpointError } from '../../src/engine/safetensors';
import { repoRoot } from '../models/golden';
import { poisoned, seeded, testEngine, type Rng } from './helpers';

/** The fp16 scale fields of each type (byte offsets in a block), set to finite values in random blocks. */
const SCALES: Record<GgmlQuant, number[]> = { Q8_0: [0], Q4_0: [0], Q4_1: [0, 2], Q5_0: [0], Q5_1: [0, 2], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208] };

function randomBlocks(rng: Rng, type: GgmlQuant, blocks: number): Uint8Array {
  const bs = GGML_TYPES[type].bytes;
  const raw = Uint8Array.from({ length: blocks * bs }, () => rng.int(0, 255));
  for (let b = 0; b < blocks; b++) {
    for (const o of SCALES[type]) {
      const v = (0.25 + 1.75 * rng.next()) * 2 ** rng.int(-8, 0) * (rng.next() < 0.5 ? -1 : 1);
      const h = f32ToF16Bits(v);
      raw[b * bs + o] = h & 0xff;
      raw[b * bs + o + 1] = h >> 8;
    }
  }
  return raw;
}

function maxAbs(v: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]!));
  return m;
}

function assertNear(got: Float32Array, want: Float32Array, dtype: 'f32' | 'f16', label: string): void {
  assert.equal(got.length, want.length, label);
  const bound = maxAbs(want) * 2 ** -22;
  const w16 = dtype === 'f16' ? roundToDType(want, 'f16') : undefined;
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const tol = dtype === 'f32' ? bound : Math.abs(w16![i]!) * 2 ** -10 + 2 ** -24;
    const w = dtype === 'f32' ? want[i]! : w16![i]!;
    if (!(Math.abs(g - w) <= tol)) assert.fail(`${label}: value ${i} is ${g}, CPU ${w} (tolerance ${tol})`);
  }
}

test('the CPU dequantiser gives gguf-py\'s values exactly, for every quantised type', () => {
  const fx = JSON.parse(readFileSync(join(repoRoot(), 'test', 'fixtures', 'golden', 'gguf', 'dequant.json'), 'utf8')) as { types: Record<string, { blocks: string; values: string }> };
  assert.deepEqual(Object.keys(fx.types).sort(), [...GGML_QUANTS].sort());
  for (const type of GGML_QUANTS) {
    const raw = new Uint8Array(Buffer.from(fx.types[type]!.blocks, 'base64'));
    const wantBuf = Buffer.from(fx.types[type]!.values, 'base64');
    const want = new Float32Array(wantBuf.buffer.slice(wantBuf.byteOffset, wantBuf.byteOffset + wantBuf.byteLength));
    const got = cpuDequant(type, raw, new Float32Array(want.length));
    for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${type} value ${i}: ${got[i]}, gguf-py ${want[i]}`);
  }
});

for (const dtype of ['f32', 'f16'] as const) {
  test(`dequant.wgsl ${dtype}: every type on fresh random blocks matches the CPU, written at an offset, nothing else touched`, seeded(async (rng) => {
    const e = await testEngine();
    for (const type of GGML_QUANTS) {
      const { block, bytes: bs } = GGML_TYPES[type];
      const nb = block === 32 ? rng.int(1, 70) : rng.int(1, 9);
      const raw = randomBlocks(rng, type, nb);
      const want = cpuDequant(type, raw, new Float32Array(nb * block));
      const t = dequantize(e, type, raw, [nb, block], dtype);
      assertNear(await e.read(t), want, dtype, `${type} ${dtype} ${nb} blocks`);
      t.free();
      // into a poisoned tensor at an offset: the values there, the rest untouched
      const lead = rng.int(1, 40);
      const out = poisoned(e, [lead + nb * block + 7], dtype);
      const blocks = e.empty([Math.ceil(raw.byteLength / 4) * 4], 'i8');
      e.writeBytes(blocks, 0, wholeWords(raw));
      dequantInto(e, type, blocks, nb * bs, out, lead);
      const got = await e.read(out);
      assertNear(got.subarray(lead, lead + nb * block), want, dtype, `${type} ${dtype} at offset ${lead}`);
      assert.ok([...got.subarray(0, lead), ...got.subarray(lead + nb * block)].every(Number.isNaN), `${type}: wrote outside its values`);
      blocks.free();
      out.free();
    }
  }));
}

test('a .gguf file as a Checkpoint: names, PyTorch shapes, pass-through and quantised tensors, CPU and GPU loads agree', seeded(async (rng) => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-gguf-'));
  try {
    const q4k = randomBlocks(rng, 'Q4_K', 8); // [4, 512]
    const q8 = randomBlocks(rng, 'Q8_0', 6); // [3, 64]
    const q51 = randomBlocks(rng, 'Q5_1', 4); // 5-D, stored 2-D as city96's convert.py does
    const f32 = Float32Array.from({ length: 6 }, (_, i) => i - 2.5);
    const f16 = Uint16Array.from([0x3c00, 0xc000, 0x3555, 0x0001]);
    const bf16 = Uint16Array.from([0x3f80, 0x4049, 0xbf00]);
    writeFileSync(join(dir, 'm.gguf'), ggufBytes({
      'blocks.0.attn.wq.weight': { type: 'Q4_K', shape: [4, 512], data: q4k },
      'first.weight': { type: 'Q8_0', shape: [3, 64], data: q8 },
      'patch.weight': { type: 'Q5_1', shape: [4, 32], data: q51 },
      'first.bias': { type: 'F32', shape: [2, 3], data: new Uint8Array(f32.buffer) },
      'norm.scale': { type: 'F16', shape: [4], data: new Uint8Array(f16.buffer) },
      'last.bias': { type: 'BF16', shape: [3], data: new Uint8Array(bf16.buffer) },
    }, { 'general.architecture': 'krea2', 'comfy.gguf.orig_shape.patch.weight': '[2, 2, 1, 4, 8]' }));
    const ck = await Checkpoint.open(join(dir, 'm.gguf'));
    try {
      assert.deepEqual(ck.keys().sort(), ['blocks.0.attn.wq.weight', 'first.bias', 'first.weight', 'last.bias', 'norm.scale', 'patch.weight']);
      assert.deepEqual(ck.entry('blocks.0.attn.wq.weight').shape, [4, 512]);
      assert.deepEqual(ck.entry('patch.weight').shape, [2, 2, 1, 4, 8]);
      assert.equal(ck.metadata['general.architecture'], 'krea2');
      assert.equal(ck.entry('first.weight').dtype, 'F32');
      assert.deepEqual(await ck.readFloat32('first.bias'), f32);
      assert.deepEqual([...await ck.readFloat32('norm.scale')], [1, -2, 0.333251953125, 2 ** -24]);
      assert.deepEqual([...await ck.readFloat32('last.bias')], [1, 3.140625, -0.5]);
      const e = await testEngine();
      for (const [name, type, raw] of [['blocks.0.attn.wq.weight', 'Q4_K', q4k], ['first.weight', 'Q8_0', q8], ['patch.weight', 'Q5_1', q51]] as const) {
        const want = cpuDequant(type, raw, new Float32Array(raw.byteLength / GGML_TYPES[type].bytes * GGML_TYPES[type].block));
        assert.deepEqual(await ck.readFloat32(name), want, `${name} on the CPU`);
        for (const dtype of ['f32', 'f16'] as const) {
          // chunks of about two blocks: several uploads through the one staging tensor
          const t = await loadTensor(e, ck, name, { dtype, chunkBytes: 2 * GGML_TYPES[type].bytes + 3 });
          assert.deepEqual(t.shape, ck.entry(name).shape);
          assertNear(await e.read(t), want, dtype, `${name} loaded as ${dtype}`);
          t.free();
        }
      }
    } finally {
      await ck.close();
    }
    // a type Kiln cannot read, and a truncated file: refused by name
    writeFileSync(join(dir, 'q2k.gguf'), ggufBytes({ 'x.weight': { type: 'Q8_0', shape: [1, 32], data: new Uint8Array(34), typeId: 10 } }));
    await assert.rejects(Checkpoint.open(join(dir, 'q2k.gguf')), (err: Error) => err instanceof CheckpointError && /tensor "x\.weight" is GGML type 10; Kiln reads F32, F16, Q4_0, .*Q6_K, BF16/.test(err.message));
    const whole = readFileSync(join(dir, 'm.gguf'));
    writeFileSync(join(dir, 'cut.gguf'), whole.subarray(0, whole.length - 40));
    await assert.rejects(Checkpoint.open(join(dir, 'cut.gguf')), /cut\.gguf: tensor ".*": data ends at byte \d+ but the file has \d+: truncated/);
    writeFileSync(join(dir, 'not.gguf'), Buffer.from('not a gguf file at all, just text'));
    await assert.rejects(Checkpoint.open(join(dir, 'not.gguf')), /not\.gguf: not a readable GGUF file/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}));
