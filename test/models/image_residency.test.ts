// The image pipelines' residency policies (models/common/image-residency.ts) give the same picture: on the demo
// checkpoints, each policy forced (the text encoder resident, offloaded to host memory after each encoding, its layers
// streamed) writes byte-identical pngs over two jobs on one loaded model (the second job uploads the offloaded encoder
// again), and each policy moves the bytes it says: nothing for resident, the encoder read back once and uploaded once
// a later job, the layers uploaded every encoding. So does the DiT's block streaming forced on (common/block-stream.ts):
// every block uploaded once a forward. An unload leaves the pool as it found it.
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import type { ImageBlockOffload, ImageResidencyReport, ImageTextResidency } from '../../src/models/common/image-residency';
import type { Pipeline } from '../../src/models/common/pipeline';
import { Krea2Pipeline, krea2DemoLayout, planDemoKrea2, type Krea2ImageTask } from '../../src/models/krea2';
import { planDemoQwenImage21 } from '../../src/models/qwen_image21/demo';
import { QwenImage21Pipeline, type QwenImageTask } from '../../src/models/qwen_image21/pipeline';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

/** Each text encoder placement forced with the blocks resident, then the blocks streamed (text encoder resident). */
const POLICIES: { text: Exclude<ImageTextResidency, 'auto'>; blocks: ImageBlockOffload }[] = [
  { text: 'resident', blocks: 'off' }, { text: 'offloaded', blocks: 'off' }, { text: 'streamed', blocks: 'off' }, { text: 'resident', blocks: 'on' },
];

describe('image residency policies give the same pngs', () => {
  let e: Engine;
  let dir: string;
  before(async () => {
    e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'kiln-imgres-'));
    await (await planDemoKrea2(e)).write(join(dir, 'krea2'));
    await (await planDemoQwenImage21(e)).write(join(dir, 'qi21'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  let n = 0;
  /** Two jobs (the second with CFG: two encodings) on one pipeline; their pngs and the reports, the pool back after. */
  async function twoJobs<T>(make: (reports: ImageResidencyReport[]) => Pipeline<T>, task: (i: number, out: string) => T): Promise<{ pngs: Buffer[]; reports: ImageResidencyReport[] }> {
    const inUse = e.pool.stats().inUseBytes;
    const reports: ImageResidencyReport[] = [];
    const pipe = make(reports);
    const pngs: Buffer[] = [];
    try {
      for (const i of [0, 1]) {
        const out = join(dir, `out-${++n}.png`);
        await pipe.run(task(i, out), recordingContext());
        pngs.push(readFileSync(out));
      }
    } finally {
      await pipe.unload();
    }
    assert.equal(e.pool.stats().inUseBytes, inUse, 'the unload gave every byte back');
    return { pngs, reports };
  }

  /** Forwards each job's sampling ran (2 steps; the second job with CFG), and block passes a forward of each family
   * makes beyond one (Qwen-Image: its prefix pass, once a prefix cache). */
  const FORWARDS = [2, 4];

  function checkMoves(policy: string, reports: ImageResidencyReport[], blocks: ImageBlockOffload, prefixPasses: number[]): void {
    assert.deepEqual(reports.map((r) => r.textEncoder), [policy, policy]);
    assert.deepEqual(reports.map((r) => r.blocks), blocks === 'on' ? ['streamed', 'streamed'] : ['resident', 'resident']);
    if (blocks === 'on') {
      // each block uploaded once a pass over the blocks, and every pass uploads every block
      reports.forEach((r, i) => assert.equal(r.samplingHostToGpuBytes, (FORWARDS[i]! + prefixPasses[i]!) * r.blockHostBytes, `job ${i}: one upload of every block a pass`));
      assert.ok(reports[0]!.blockHostBytes > 0);
    } else assert.ok(reports.every((r) => r.samplingHostToGpuBytes === 0 && r.blockHostBytes === 0));
    const [a, b] = reports as [ImageResidencyReport, ImageResidencyReport];
    if (policy === 'resident') assert.deepEqual([a.hostToGpuBytes, a.gpuToHostBytes, b.hostToGpuBytes, b.gpuToHostBytes], [0, 0, 0, 0]);
    if (policy === 'offloaded') {
      assert.ok(a.gpuToHostBytes > 0 && b.gpuToHostBytes === 0, 'read back once, the host copy kept');
      assert.equal(b.hostToGpuBytes, a.gpuToHostBytes, 'a job uploads the encoder once');
    }
    if (policy === 'streamed') {
      assert.ok(a.streamedBytes > 0);
      assert.equal(b.streamedBytes, 2 * a.streamedBytes, 'every layer uploaded once an encoding (the second job encodes two prompts)');
      // forced streamed is the most frugal: the resident rest (embeddings, vision tower) also waits on the host
      assert.ok(a.gpuToHostBytes > 0 && b.gpuToHostBytes === 0 && a.offloadedBytes === a.gpuToHostBytes && b.offloadedBytes === a.offloadedBytes);
      assert.equal(b.hostToGpuBytes, b.streamedBytes + b.offloadedBytes);
    }
  }

  test('Qwen-Image-2.1 (int8): resident, offloaded, streamed; blocks streamed', async () => {
    const task = (i: number, outputPath: string): QwenImageTask => ({
      prompt: 'a red kiln at dusk', negative: 'blurry', cfg: i === 0 ? 1 : 2, seed: 3 + i, steps: 2, width: 128, height: 96, references: [], referenceArea: 512 * 512,
      outputPath, png: { prompt: 'a red kiln at dusk', profile: 'imgmain', seed: 3, steps: 2 },
    });
    let resident: Buffer[] | null = null;
    for (const { text, blocks } of POLICIES) {
      const { pngs, reports } = await twoJobs((reports) => new QwenImage21Pipeline({
        engine: async () => e, checkpoint: async () => join(dir, 'qi21'), int8: true, textResidency: text, blockOffload: blocks, onResidency: (r) => reports.push(r),
      }), task);
      checkMoves(text, reports, blocks, [1, 2]); // the prefix of each prompt runs once (causal_condition)
      resident ??= pngs;
      assert.deepEqual(pngs, resident, `${text}, blocks ${blocks}: the same png bytes as resident`);
    }
  });

  test('Krea 2 Turbo (16-bit): resident, offloaded, streamed; blocks streamed', async () => {
    const task = (i: number, outputPath: string): Krea2ImageTask => ({
      prompt: 'a lighthouse at dusk', negative: 'fog', cfg: i === 0 ? 1 : 2, seed: 7 + i, steps: 2, width: 64, height: 48, references: [],
      outputPath, png: { prompt: 'p', profile: 'imgart_turbo', seed: 7, steps: 2 },
    });
    let resident: Buffer[] | null = null;
    for (const { text, blocks } of POLICIES) {
      const { pngs, reports } = await twoJobs((reports) => new Krea2Pipeline({
        engine: async () => e, layout: async () => krea2DemoLayout(join(dir, 'krea2')), int8: false, textResidency: text, blockOffload: blocks, onResidency: (r) => reports.push(r),
      }), task);
      checkMoves(text, reports, blocks, [0, 0]);
      resident ??= pngs;
      assert.deepEqual(pngs, resident, `${text}, blocks ${blocks}: the same png bytes as resident`);
    }
  });
});
