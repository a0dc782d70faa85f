// Sampled latents or a decoded output with NaN or infinite values are a failed job, never a delivered file
// (models/common/finite-output.ts): before the check, a random demo Qwen-Image-2.1 in f16 whose residual stream
// overflowed wrote an all-white png as its result. Here each image pipeline runs on its demo checkpoint with its DiT's
// last linear set to NaN in the file (the way a corrupt download or an overflow poisons every pixel after it): the run
// rejects with NonFiniteOutputError naming what it found, and no file is written. The same checkpoint unpoisoned writes
// its png (the check does not refuse a good picture).
import assert from 'node:assert/strict';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { assertFiniteOutput, NonFiniteOutputError } from '../../src/models/common/finite-output';
import { Krea2Pipeline, krea2DemoLayout, planDemoKrea2, type Krea2ImageTask } from '../../src/models/krea2';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

/** NaN's bit pattern per safetensors dtype. */
const NAN: Record<string, Buffer> = {
  F32: Buffer.from([0x00, 0x00, 0xc0, 0x7f]),
  F16: Buffer.from([0x00, 0x7e]),
  BF16: Buffer.from([0xc0, 0x7f]),
};

/** Overwrites every value of the first tensor whose name matches `pick` in the .safetensors files of `dir` with NaN;
 * returns the tensor's name. */
function poison(dir: string, pick: RegExp): string {
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, f), 'r+');
    try {
      const len = Buffer.alloc(8);
      readSync(fd, len, 0, 8, 0);
      const n = Number(len.readBigUInt64LE());
      const head = Buffer.alloc(n);
      readSync(fd, head, 0, n, 8);
      const header = JSON.parse(head.toString('utf8')) as Record<string, { dtype: string; data_offsets: [number, number] }>;
      const name = Object.keys(header).find((k) => k !== '__metadata__' && pick.test(k));
      if (!name) continue;
      const { dtype, data_offsets: [a, b] } = header[name]!;
      const nan = NAN[dtype];
      assert.ok(nan, `a NaN for ${dtype}`);
      const bytes = Buffer.alloc(b - a);
      for (let i = 0; i < bytes.length; i += nan.length) nan.copy(bytes, i);
      writeSync(fd, bytes, 0, bytes.length, 8 + n + a);
      return name;
    } finally {
      closeSync(fd);
    }
  }
  throw new Error(`no tensor like ${pick} in ${dir}`);
}

test('assertFiniteOutput: finite passes; NaN and +-inf are counted and named', () => {
  assertFiniteOutput(new Float32Array([0, -1, 3e38]), 'x', 'h');
  assert.throws(() => assertFiniteOutput(new Float32Array([0, NaN, Infinity, -Infinity, 1]), 'the decoded picture', 'try again'), (e: unknown) => {
    assert.ok(e instanceof NonFiniteOutputError);
    assert.equal(e.message, 'NaN or infinite values in the decoded picture (3 of 5): the model\'s numbers overflowed or a weight is corrupt, so nothing was written; try again');
    return true;
  });
  assert.throws(() => assertFiniteOutput(new Float32Array([NaN, NaN]), 'x', 'h'), /\(all\)/);
});

describe('an image pipeline whose decoded picture is NaN fails the job and writes nothing', () => {
  let e: Engine;
  let dir: string;
  before(async () => {
    e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'kiln-finite-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const rejectsNaN = async (run: () => Promise<void>, output: string) => {
    await assert.rejects(run, (err: unknown) => {
      assert.ok(err instanceof NonFiniteOutputError, String(err));
      assert.match(err.message, /^NaN or infinite values in the sampled latents \((all|\d+ of \d+)\): the model's numbers overflowed or a weight is corrupt, so nothing was written; try another seed/);
      return true;
    });
    assert.equal(existsSync(output), false, 'no png written');
  };

  test('Krea 2 Turbo (demo checkpoint, the DiT\'s last linear NaN)', { timeout: 300_000 }, async () => {
    const root = join(dir, 'krea2');
    await (await planDemoKrea2(e)).write(root);
    const pipe = new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(root), int8: false, dtype: 'f32' });
    const task = (outputPath: string): Krea2ImageTask => ({
      prompt: 'a lighthouse', negative: '', cfg: 1, seed: 7, steps: 1, width: 64, height: 48, references: [], outputPath, png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 1 },
    });
    try {
      const good = join(dir, 'krea2-good.png');
      await pipe.run(task(good), recordingContext());
      assert.ok(existsSync(good), 'the unpoisoned checkpoint writes its png');
      await pipe.unload();
      const name = poison(join(root, 'transformer'), /^last\.linear\.weight$/);
      const bad = join(dir, 'krea2-bad.png');
      await rejectsNaN(() => pipe.run(task(bad), recordingContext()), bad);
      assert.ok(name.length > 0);
    } finally {
      await pipe.unload();
    }
  });

  test('Qwen-Image-2.1 (demo checkpoint, the DiT\'s proj_out NaN)', { timeout: 300_000 }, async () => {
    const root = join(dir, 'qi21');
    await (await planDemoQwenImage21(e)).write(root);
    poison(join(root, 'transformer'), /^proj_out\.weight$/);
    const pipe = new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => root, int8: false, dtype: 'f32' });
    const out = join(dir, 'qi21-bad.png');
    const task: QwenImageTask = {
      prompt: 'a red kiln', negative: '', cfg: 1, seed: 3, steps: 2, width: 64, height: 64, references: [], referenceArea: 512 * 512, outputPath: out,
      png: { prompt: 'a red kiln', profile: 'imgmain', seed: 3, steps: 2 },
    };
    try {
      await rejectsNaN(() => pipe.run(task, recordingContext()), out);
    } finally {
      await pipe.unload();
    }
  });
});
