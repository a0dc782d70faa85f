// safetensors: writer/reader round trips, sharded index, corrupt and truncated files, GPU upload in chunks.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readFileSync, statSync, writeFileSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { f16BitsToF32, f32ToF16Bits as f16Round } from '../../src/engine/dtype';
import { loadTensor } from '../../src/engine/load';
import { Checkpoint, CheckpointError, decodeSafe, type SafeDType } from '../../src/engine/safetensors';
import { writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { assertClose, randomHost, seeded, testEngine } from './helpers';

const dir = mkdtempSync(join(tmpdir(), 'kiln-st-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function sample(values: Float64Array): Record<string, WriteTensor> {
  return {
    'blocks.0.attn.qkv.weight': { dtype: 'F32', shape: [3, 5], data: values.slice(0, 15) },
    'blocks.0.attn.qkv.bias': { dtype: 'F16', shape: [5], data: values.slice(0, 5) },
    'blocks.1.mlp.fc1.weight': { dtype: 'BF16', shape: [7, 3], data: values.slice(0, 21) },
    'quant.weight': { dtype: 'I8', shape: [2, 2], data: [-128, -1, 0, 127] },
    'quant.bytes': { dtype: 'U8', shape: [3], data: [0, 200, 255] },
    'fp8.weight': { dtype: 'F8_E4M3', shape: [4], data: new Uint8Array([0x38, 0xb8, 0x7e, 0x01]) },
  };
}

test('write then read every dtype, with metadata', seeded(async (rng) => {
  const values = rng.uniform(21, -4, 4);
  const path = join(dir, 'one.safetensors');
  await writeSafetensors(path, sample(values), { format: 'pt' });
  const ck = await Checkpoint.open(path);
  try {
    assert.deepEqual(ck.metadata, { format: 'pt' });
    assert.equal(ck.keys().length, 6);
    assertClose(await ck.readFloat32('blocks.0.attn.qkv.weight'), { data: values.slice(0, 15), shape: [3, 5] }, 'f32', 'F32');
    assertClose(await ck.readFloat32('blocks.0.attn.qkv.bias'), { data: values.slice(0, 5), shape: [5] }, 'f16', 'F16');
    assertClose(await ck.readFloat32('blocks.1.mlp.fc1.weight'), { data: values.slice(0, 21), shape: [7, 3] }, { atol: 0, rtol: 2 ** -8 }, 'BF16');
    assert.deepEqual(Array.from(await ck.readFloat32('quant.weight')), [-128, -1, 0, 127]);
    assert.deepEqual(Array.from(await ck.readFloat32('quant.bytes')), [0, 200, 255]);
    assert.deepEqual(Array.from(await ck.readFloat32('fp8.weight')), [1, -1, 448, 2 ** -9]);
    // the header is padded so the data starts 8-byte aligned
    assert.equal(Number(readFileSync(path).readBigUInt64LE(0)) % 8, 0);
  } finally {
    await ck.close();
  }
}));

test('null data leaves a hole: the real header and length, zeros when read, next to written tensors (a plan\'s checkpoint)', async () => {
  const path = join(dir, 'holes.safetensors');
  const big = 1 << 22; // 16 MiB of F32 that are never written
  await writeSafetensors(path, { hole: { dtype: 'F32', shape: [big], data: null }, small: { dtype: 'F32', shape: [3], data: [1, 2, 3] } });
  const st = statSync(path);
  assert.ok(st.size > 16 * 2 ** 20, 'the file has its full length');
  assert.ok(st.blocks * 512 < 2 ** 20, `sparse: ${st.blocks * 512} bytes on disk`);
  const ck = await Checkpoint.open(path);
  try {
    assert.deepEqual(ck.entry('hole').shape, [big]);
    assert.deepEqual(Array.from(await ck.readFloat32('small')), [1, 2, 3], 'a tensor after the hole is where its offsets say');
    const hole = await ck.readFloat32('hole');
    assert.ok(hole.length === big && hole.every((v) => v === 0));
  } finally {
    await ck.close();
  }
});

test('missing keys and wrong shapes are named', async () => {
  const path = join(dir, 'names.safetensors');
  await writeSafetensors(path, sample(new Float64Array(21)));
  const ck = await Checkpoint.open(path);
  try {
    assert.throws(() => ck.entry('blocks.0.attn.qkv.weights'), /no tensor "blocks\.0\.attn\.qkv\.weights" \(similar: blocks\.0\.attn\.qkv\.weight/);
    assert.throws(() => ck.entry('blocks.0.attn.qkv.weight', [5, 3]), /"blocks\.0\.attn\.qkv\.weight" is F32\[3,5\], expected shape \[5,3\]/);
  } finally {
    await ck.close();
  }
});

test('truncated and corrupt files give clear errors', async () => {
  const good = join(dir, 'good.safetensors');
  await writeSafetensors(good, sample(new Float64Array(21)));
  const bytes = readFileSync(good);

  const cut = join(dir, 'cut.safetensors');
  writeFileSync(cut, bytes.subarray(0, bytes.length - 3));
  await assert.rejects(Checkpoint.open(cut), /truncated/);

  const headerCut = join(dir, 'header-cut.safetensors');
  writeFileSync(headerCut, bytes.subarray(0, 40));
  await assert.rejects(Checkpoint.open(headerCut), /header length \d+ does not fit the file \(40 bytes\)/);

  const tiny = join(dir, 'tiny.safetensors');
  writeFileSync(tiny, Buffer.from([1, 2, 3]));
  await assert.rejects(Checkpoint.open(tiny), /not a safetensors file \(3 bytes\)/);

  const garbage = Buffer.from(bytes);
  garbage.write('{{{{', 8);
  const bad = join(dir, 'bad-json.safetensors');
  writeFileSync(bad, garbage);
  await assert.rejects(Checkpoint.open(bad), /header is not valid JSON/);

  const wrongLen = join(dir, 'wrong-len.safetensors');
  await writeSafetensors(wrongLen, { x: { dtype: 'F32', shape: [2], data: [1, 2] } });
  const w = readFileSync(wrongLen);
  writeFileSync(wrongLen, Buffer.from(w.toString('latin1').replace('"shape":[2]', '"shape":[3]'), 'latin1'));
  await assert.rejects(Checkpoint.open(wrongLen), /tensor "x": F32\[3\] needs 12 bytes, data_offsets give 8/);

  // a file truncated after opening: the read names the tensor
  const late = join(dir, 'late.safetensors');
  writeFileSync(late, bytes);
  const ck = await Checkpoint.open(late);
  truncateSync(late, bytes.length - 30);
  await assert.rejects(ck.readFloat32('fp8.weight'), /tensor "fp8\.weight" truncated/);
  await ck.close();
});

test('sharded checkpoints open through the index', seeded(async (rng) => {
  const sdir = join(dir, 'sharded');
  const tensors = sample(rng.uniform(21));
  const index = await writeShardedSafetensors(sdir, tensors, 64);
  const ck = await Checkpoint.open(sdir);
  try {
    assert.deepEqual(ck.keys().sort(), Object.keys(tensors).sort());
    assert.ok(new Set(ck.keys().map((k) => ck.entry(k).file)).size > 1, 'expected several shards');
    assert.deepEqual(Array.from(await ck.readFloat32('quant.weight')), [-128, -1, 0, 127]);
  } finally {
    await ck.close();
  }
  // an index naming a key its shard lacks
  const idx = JSON.parse(readFileSync(index, 'utf8'));
  idx.weight_map['ghost.weight'] = idx.weight_map['quant.weight'];
  writeFileSync(index, JSON.stringify(idx));
  await assert.rejects(Checkpoint.open(index), (e: Error) => e instanceof CheckpointError && /"ghost\.weight" in model-\d+-of-\d+\.safetensors, which does not hold it/.test(e.message));
}));

test('streaming upload converts BF16/F16/F32 on the way to the GPU', seeded(async (rng) => {
  const e = await testEngine();
  const n = 1001; // several small chunks plus a tail
  const h = randomHost(rng, [7, 143], 'f32', -3, 3);
  const path = join(dir, 'upload.safetensors');
  await writeSafetensors(path, {
    w32: { dtype: 'F32', shape: [7, 143], data: h.data },
    w16: { dtype: 'F16', shape: [n], data: h.data.slice(0, n) },
    wbf: { dtype: 'BF16', shape: [n], data: h.data.slice(0, n) },
    big: { dtype: 'F32', shape: [2], data: [1e6, 1] },
    bigbf: { dtype: 'BF16', shape: [5], data: [1, 2, -1e6, 3, 4] },
  });
  const ck = await Checkpoint.open(path);
  try {
    for (const [name, dtype] of [['w32', 'f32'], ['w32', 'f16'], ['w16', 'f16'], ['w16', 'f32'], ['wbf', 'f32'], ['wbf', 'f16']] as const) {
      const t = await loadTensor(e, ck, name, { dtype, chunkBytes: 96 });
      const want = await ck.readFloat32(name);
      const expect = dtype === 'f16' ? Float64Array.from(want, (v) => f16BitsToF32(f16Round(v))) : Float64Array.from(want);
      assertClose(await e.read(t), { data: expect, shape: [...t.shape] }, { atol: 0, rtol: 0 }, `${name} -> ${dtype}`);
      t.free();
    }
    await assert.rejects(loadTensor(e, ck, 'big', { dtype: 'f16' }), /holds 1000000, beyond f16's range/);
    // BF16 -> f16 goes by table (load.ts bf16ToF16): a finite value past f16's range is refused the same way
    await assert.rejects(loadTensor(e, ck, 'bigbf', { dtype: 'f16' }), /"bigbf" holds -999424, beyond f16's range/);
    await assert.rejects(loadTensor(e, ck, 'w32', { shape: [143, 7] }), /is F32\[7,143\], expected shape \[143,7\]/);
  } finally {
    await ck.close();
  }
}));

test('decodeSafe: the typed-array path (aligned) and the DataView path (odd offset) agree for F32, F16, BF16', () => {
  const bytes = new Uint8Array(4 * 4099 + 1); // every bit pattern class: normals, subnormals, inf, NaN
  let s = 12345;
  for (let i = 0; i < bytes.length; i++) bytes[i] = (s = (s * 1103515245 + 12345) >>> 0) >>> 24;
  for (const dtype of ['F32', 'F16', 'BF16'] as SafeDType[]) {
    const aligned = decodeSafe(bytes.subarray(0, bytes.length - 1), dtype);
    // the same bytes at an odd offset (a view one byte into a buffer): no typed view fits, so the DataView loop runs
    const shifted = new Uint8Array(bytes.length);
    shifted.set(bytes.subarray(0, bytes.length - 1), 1);
    const viaDataView = decodeSafe(shifted.subarray(1), dtype);
    assert.equal(aligned.length, viaDataView.length, dtype);
    for (let i = 0; i < aligned.length; i++) {
      const [a, b] = [aligned[i]!, viaDataView[i]!];
      assert.ok(Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)), `${dtype} element ${i}: ${a} vs ${b}`);
    }
  }
});

test('readChunks: the next chunk is read while this one is consumed; every byte once, in order; a consumer\'s error stops it', async () => {
  const path = join(dir, 'chunks.safetensors');
  const n = 1000;
  const values = Float32Array.from({ length: n }, (_, i) => i * 0.5 - 7);
  await writeSafetensors(path, { a: { dtype: 'F32', shape: [n], data: values } });
  const ckpt = await Checkpoint.open(path);
  try {
    const want = Buffer.from(values.buffer);
    for (const chunk of [4, 12, 400, 3996, 4000, 1 << 20]) {
      const got = Buffer.alloc(n * 4);
      const offsets: number[] = [];
      // an async consumer that yields: the read-ahead must not overwrite the chunk in hand
      await ckpt.readChunks('a', chunk, async (bytes, off) => {
        const copy = Buffer.from(bytes);
        await new Promise((r) => setImmediate(r));
        assert.ok(copy.equals(bytes), `chunk ${chunk}: the bytes stay put while consumed`);
        copy.copy(got, off);
        offsets.push(off);
      });
      assert.ok(got.equals(want), `chunk ${chunk}`);
      assert.deepEqual(offsets, Array.from({ length: Math.ceil((n * 4) / Math.min(chunk, n * 4)) }, (_, i) => i * Math.min(chunk, n * 4)));
    }
    let calls = 0;
    await assert.rejects(ckpt.readChunks('a', 400, () => {
      if (++calls === 3) throw new Error('consumer failed');
    }), /consumer failed/);
    assert.equal(calls, 3);
  } finally {
    await ckpt.close();
  }
});
