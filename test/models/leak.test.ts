// Nothing leaks (issue 42, memory ownership): on the demo checkpoints, every job a converted model family runs (plain,
// CFG with a negative prompt, style references, one cancelled between steps) leaves the pool's bytes in use exactly
// where the load left them, and unload() gives back every byte the load took. A forward that drops a temporary, or a
// module that forgets a weight in free(), fails here with the bytes it kept.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import { Krea2Pipeline, krea2DemoLayout, planDemoKrea2, type Krea2ImageTask } from '../../src/models/krea2';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { pngBytes } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

const inUse = (e: Engine) => e.pool.stats().inUseBytes;

interface Family<T> {
  name: string;
  make(e: Engine, dir: string): { load(ctx: ReturnType<typeof recordingContext>): Promise<void>; run(t: T, ctx: ReturnType<typeof recordingContext>): Promise<void>; unload(): Promise<void> };
  tasks(dir: string, refs: string[]): [string, T][];
}

describe('no GPU memory leaks across whole jobs on the demo checkpoints', () => {
  let e: Engine;
  let dir: string;
  const refs: string[] = [];
  before(async () => {
    e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'kiln-leak-'));
    await (await planDemoKrea2(e)).write(join(dir, 'krea2'));
    await (await planDemoQwenImage21(e)).write(join(dir, 'qi21'));
    for (const [i, [w, h]] of [[96, 64], [40, 120]].entries()) {
      const p = join(dir, `ref${i}.png`);
      writeFileSync(p, await pngBytes(w, h));
      refs.push(p);
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  let n = 0;
  const out = () => join(dir, `out-${++n}.png`);

  const krea2: Family<Krea2ImageTask> = {
    name: 'Krea 2 Turbo',
    make: (en, d) => new Krea2Pipeline({ engine: async () => en, layout: async () => krea2DemoLayout(join(d, 'krea2')), int8: false }),
    tasks: (_d, r) => {
      const t = (over: Partial<Krea2ImageTask>): Krea2ImageTask => ({
        prompt: 'a lighthouse at dusk', negative: '', cfg: 1, seed: 7, steps: 2, width: 64, height: 48, references: [],
        outputPath: out(), png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 2 }, ...over,
      });
      return [['plain', t({})], ['cfg 2 with a negative prompt', t({ cfg: 2, negative: 'blurry' })], ['two style references', t({ references: r })], ['cancelled', t({ steps: 3 })]];
    },
  };
  const qwen: Family<QwenImageTask> = {
    name: 'Qwen-Image-2.1',
    make: (en, d) => new QwenImage21Pipeline({ engine: async () => en, checkpoint: async () => join(d, 'qi21'), int8: false }),
    tasks: (_d, r) => {
      const t = (over: Partial<QwenImageTask>): QwenImageTask => ({
        prompt: 'a red kiln at dusk', negative: '', cfg: 1, seed: 3, steps: 2, width: 128, height: 96, references: [], referenceArea: 256 * 256,
        outputPath: out(), png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 }, ...over,
      });
      return [['plain', t({})], ['cfg 2 with a negative prompt', t({ cfg: 2, negative: 'blurry' })], ['a reference image', t({ references: [r[0]!] })], ['cancelled', t({ steps: 3 })]];
    },
  };

  for (const fam of [krea2, qwen] as Family<unknown>[]) {
    test(`${fam.name}: each job leaves the bytes the load left; unload gives back what the load took`, async () => {
      const pipe = fam.make(e, dir);
      const start = inUse(e);
      try {
        await pipe.load(recordingContext());
        await e.sync();
        const loaded = inUse(e);
        assert.ok(loaded > start, 'the load holds the weights');
        for (const [what, task] of fam.tasks(dir, refs)) {
          if (what === 'cancelled') {
            const abort = new AbortController();
            let steps = 0;
            const ctx = recordingContext({ signal: abort.signal, onProgress: () => ++steps === 2 && abort.abort() });
            await assert.rejects(pipe.run(task, ctx), CancelledError);
          } else {
            await pipe.run(task, recordingContext());
          }
          await e.sync();
          assert.equal(inUse(e) - loaded, 0, `${fam.name}, ${what}: bytes in use after the job less after the load`);
        }
      } finally {
        await pipe.unload();
      }
      assert.equal(inUse(e) - start, 0, `${fam.name}: bytes in use after unload less before the load`);
    });
  }
});
