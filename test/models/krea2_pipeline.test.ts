// The Krea 2 Turbo pipeline on the demo checkpoint (the components are golden-tested in the other krea2* files): the
// demo's files are the layout the loaders read (config inferred from the DiT's shapes, every tensor present), and the
// service pipeline end to end: a png of the asked size, stages in order, progress per step, same seed -> same bytes,
// another seed -> other bytes, style references change the picture deterministically, CFG runs, cancel stops.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import { STAGE, type Stage } from '../../src/catalog';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint } from '../../src/engine/safetensors';
import {
  DEMO_KREA2_DIT, inferKrea2Config, Krea2Pipeline, krea2DemoLayout, krea2Noise, krea2Rgb8, krea2StyleTokens, parseKrea2Config, planDemoKrea2, type Krea2ImageTask,
} from '../../src/models/krea2';
import { TextTokenizer } from '../../src/models/tokenizer';
import { pngBytes, pngSize } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

describe('Krea 2 Turbo pipeline on the demo checkpoint', () => {
  let e: Engine;
  let dir: string;
  let pipe: Krea2Pipeline;
  const refs: string[] = [];
  before(async () => {
    e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'krea2-demo-'));
    await (await planDemoKrea2(e)).write(join(dir, 'ckpt'));
    pipe = new Krea2Pipeline({ engine: async () => e, layout: async () => krea2DemoLayout(join(dir, 'ckpt')), int8: false, dtype: 'f32' });
    for (const [i, [w, h]] of [[96, 64], [40, 120], [300, 300]].entries()) {
      const p = join(dir, `ref${i}.png`);
      writeFileSync(p, await pngBytes(w, h));
      refs.push(p);
    }
  });
  after(async () => {
    await pipe.unload();
    rmSync(dir, { recursive: true, force: true });
  });

  const task = (over: Partial<Krea2ImageTask> = {}): Krea2ImageTask => ({
    prompt: 'a lighthouse at dusk, oil painting', negative: '', cfg: 1, seed: 7, steps: 2, width: 64, height: 48, references: [],
    outputPath: join(dir, `out-${Math.random().toString(36).slice(2)}.png`), png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 2 }, ...over,
  });
  const run = async (t: Krea2ImageTask, stages?: Stage[], progress?: [number, number][]) => {
    await pipe.run(t, recordingContext({ stages, progress }));
    return readFileSync(t.outputPath);
  };

  test('the demo DiT\'s config is read off its shapes', async () => {
    const layout = krea2DemoLayout(join(dir, 'ckpt'));
    const ckpt = await Checkpoint.open(layout.transformer);
    try {
      assert.deepEqual(inferKrea2Config(ckpt, 16), parseKrea2Config(DEMO_KREA2_DIT));
    } finally {
      await ckpt.close();
    }
  });

  test('a png of the asked size; stages and progress per step; same seed same bytes, another seed other bytes', async () => {
    const stages: Stage[] = [];
    const progress: [number, number][] = [];
    const a = await run(task(), stages, progress);
    assert.deepEqual(pngSize(a), { width: 64, height: 48 });
    assert.deepEqual(stages.filter((s) => s !== STAGE.loadTextEncoder), [STAGE.encode, STAGE.sample, STAGE.save]);
    assert.deepEqual(progress, [[0, 2], [1, 2], [2, 2]]);
    assert.deepEqual(await run(task()), a, 'same task, same bytes');
    assert.notDeepEqual(await run(task({ seed: 8 })), a, 'another seed');
    assert.notDeepEqual(await run(task({ steps: 3 })), a, 'another step count');
  });

  test('style references (1 to 3) change the picture, deterministically and by order', async () => {
    const plain = await run(task());
    const one = await run(task({ references: [refs[0]!] }));
    assert.notDeepEqual(one, plain, 'a reference changes the picture');
    assert.deepEqual(await run(task({ references: [refs[0]!] })), one, 'the same reference, the same bytes');
    const three = await run(task({ references: refs }));
    assert.notDeepEqual(three, one);
    assert.notDeepEqual(await run(task({ references: [refs[2]!, refs[1]!, refs[0]!] })), three, 'order matters (Style reference 1..N)');
    assert.deepEqual(pngSize(three), { width: 64, height: 48 });
  });

  test('cfg > 1 runs the negative prompt too and changes the picture', async () => {
    const plain = await run(task());
    const guided = await run(task({ cfg: 3, negative: 'blurry' }));
    assert.notDeepEqual(guided, plain);
  });

  test('sizes off the 16 px grid are refused; cancel stops between steps', async () => {
    await assert.rejects(pipe.run(task({ width: 72 }), recordingContext()), /multiple of 16/);
    const ac = new AbortController();
    let steps = 0;
    await assert.rejects(
      pipe.run(task({ steps: 4 }), recordingContext({ signal: ac.signal, onProgress: () => ++steps === 2 && ac.abort() })),
      (err: unknown) => err instanceof CancelledError,
    );
  });
});

test('krea2Noise: channel-major standard normal draws, a function of the seed', () => {
  const a = krea2Noise(3, 16, 4, 6);
  assert.equal(a.length, 16 * 24);
  assert.deepEqual(krea2Noise(3, 16, 4, 6), a);
  assert.notDeepEqual(krea2Noise(4, 16, 4, 6), a);
});

test('krea2Rgb8: clamp, (x + 1) / 2 * 255 truncated as sampling.py\'s .byte()', () => {
  assert.deepEqual(Array.from(krea2Rgb8(Float32Array.from([-2, -1, 0, 0.999, 1, 3, 0.5]))), [0, 0, 127, 254, 255, 255, 191]);
});

test('the style template: prefix, one labelled vision block per reference, the prompt cut at 507 tokens, the suffix', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'krea2-tok-'));
  try {
    const { writeDemoTokenizer } = await import('../../src/models/tokenizer');
    const { DEMO_KREA2_TOKENS, KREA2_TEMPLATE_PREFIX, KREA2_TEMPLATE_SUFFIX, krea2StyleBlock } = await import('../../src/models/krea2');
    await writeDemoTokenizer(dir, { specialTokens: DEMO_KREA2_TOKENS });
    const tok = await TextTokenizer.fromDir(dir);
    const t = krea2StyleTokens(tok, 'a cat', 2);
    const head = [...tok.encode(KREA2_TEMPLATE_PREFIX), ...tok.encode(krea2StyleBlock(1)), ...tok.encode(krea2StyleBlock(2))];
    assert.deepEqual(t.ids, [...head, ...tok.encode('a cat'), ...tok.encode(KREA2_TEMPLATE_SUFFIX)]);
    assert.equal(t.promptStart, head.length);
    assert.equal(t.ids.filter((id) => id === tok.tokenId('<|image_pad|>')).length, 2);
    const long = krea2StyleTokens(tok, 'word '.repeat(700), 1);
    assert.equal(long.ids.length - long.promptStart, 507 + tok.encode(KREA2_TEMPLATE_SUFFIX).length);
    assert.ok(long.truncated > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
