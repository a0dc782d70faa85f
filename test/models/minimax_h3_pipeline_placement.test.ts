// The DiT's block placement follows the job (issue 42): MiniMax H3's residency policy (residency.ts) under one memory
// budget that holds a small job with the blocks resident but not a bigger one. A pipeline loaded for a job
// (Pipeline.load's `next`, as the worker's runner and a plan load) places the blocks for it: on the GPU for the small
// job, straight to host memory for the big one. A loaded pipeline re-places them for the next job (Pipeline.prepare, as
// the runner does before each run on a kept model): back onto the GPU for a small job after a big one, off to host
// memory for a big one after a small one. Each job's file is the same bytes as that job on a freshly loaded pipeline.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { STAGE } from '../../src/catalog';
import type { Engine } from '../../src/engine/engine';
import type { RunContext } from '../../src/models/common/pipeline';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { h3DirsFromRoot, jobGeometry, MiniMaxH3Pipeline, type H3PipelineOptions, type H3ResidencyReport, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { samplingWorkingBytes } from '../../src/models/minimax_h3/residency';
import type { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { ensureDemoCheckpoint } from '../../src/weights';
import { testEngine } from '../engine/helpers';

const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-placement-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A context that records the stages entered. */
function context(): { ctx: RunContext; stages: string[] } {
  const stages: string[] = [];
  return { stages, ctx: { signal: new AbortController().signal, stage: (s) => void stages.push(s), progress: () => {}, safePoint: async () => {} } };
}

describe('MiniMax H3: the DiT\'s block placement follows the job', () => {
  let e: Engine;
  let root: string;
  let out: string;
  /** The tiniest jobs of the grid: 64x64 and 96x64, 22 frames, 2 steps, the same seed. */
  const small = (id: string): H3Task => ({ prompt: 'a cat sings', seed: 7, steps: 2, width: 64, height: 64, frames: 22, images: [], audios: [], outputPath: join(out, `${id}.mp4`) });
  const big = (id: string): H3Task => ({ ...small(id), width: 96 });
  let budget = 0;
  let weightBytes = 0;
  const reports: H3ResidencyReport[] = [];
  const traces: { event: string; bytes: number }[] = [];
  const options = (o: Partial<H3PipelineOptions> = {}): H3PipelineOptions => ({
    engine: async () => e,
    dirs: async () => h3DirsFromRoot(root),
    // the policy's placement taken at load, as the worker's loader does
    loadTransformer: (eng, dirs, l) => loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: l.dtype, blocks: l.blocks }),
    memoryBudgetBytes: budget,
    onResidency: (r) => reports.push(r),
    trace: (event, info) => traces.push({ event, bytes: info.inUseBytes }),
    ...o,
  });

  before(async () => {
    e = await testEngine();
    const plan = await planDemoH3(e);
    out = join(dir, 'out');
    mkdirSync(out);
    root = await ensureDemoCheckpoint({ name: 'minimax-h3', version: plan.version, root: join(dir, 'demo'), generate: plan.write });
    // the budget between the two jobs' needs with every block resident (the policy's own estimate, residency.ts)
    let transformer: MiniMaxH3Transformer | undefined;
    const probe = new MiniMaxH3Pipeline(options({
      blockOffload: 'off',
      onLoaded: (bytes) => (weightBytes = bytes),
      loadTransformer: async (eng, dirs, l) => (transformer = await loadH3Transformer(eng, 'fastvid', { transformer: dirs.transformer }, { dtype: l.dtype })),
    }));
    await probe.load(context().ctx);
    await probe.unload();
    const c = transformer!.config;
    const need = (t: H3Task) => weightBytes + samplingWorkingBytes(c, jobGeometry(t.frames, t.height, t.width, c.patchSize), transformer!.dtype);
    budget = Math.round((need(small('x')) + need(big('x'))) / 2);
    assert.ok(need(small('x')) < budget && budget < need(big('x')), `${need(small('x'))} < ${budget} < ${need(big('x'))}`);
  });

  /** Loads a pipeline for `first` and runs it, then prepares for `second` and runs that: the stages of each, the
   * bytes held once loaded and after each preparation, the files, the placements. */
  async function twoJobs(first: H3Task, second: H3Task) {
    reports.length = 0;
    traces.length = 0;
    const p = new MiniMaxH3Pipeline(options());
    try {
      const a = context();
      await p.load(a.ctx, first);
      const loaded = traces.find((t) => t.event === 'loaded')!.bytes;
      await p.run(first, a.ctx);
      const b = context();
      traces.length = 0;
      await p.prepare(b.ctx, second);
      const moved = traces.find((t) => t.event.startsWith('blocks '));
      await p.run(second, b.ctx);
      return { stages: [a.stages, b.stages], loaded, moved, files: [sha(first.outputPath), sha(second.outputPath)], blocks: reports.map((r) => r.blocks), hostBytes: reports.map((r) => r.blockHostBytes) };
    } finally {
      await p.unload();
    }
  }

  test('small then big, and big then small, on one loaded pipeline: each placed for its job, the same files both ways', async () => {
    const up = await twoJobs(small('up-small'), big('up-big'));
    const down = await twoJobs(big('down-big'), small('down-small'));
    assert.deepEqual(up.blocks, ['resident', 'streamed']);
    assert.deepEqual(down.blocks, ['streamed', 'resident']);
    // loaded for the big job, the blocks went straight to host memory: fewer bytes held than loaded for the small one
    assert.ok(down.loaded < up.loaded, `loaded for the big job ${down.loaded} bytes, for the small one ${up.loaded}`);
    assert.ok(up.loaded - down.loaded >= down.hostBytes[0]! && down.hostBytes[0]! > 0, `${up.loaded - down.loaded} pool bytes fewer for ${down.hostBytes[0]} bytes of blocks`);
    // the move is the second job's load stage (加载模型), ahead of its text encoder
    for (const r of [up, down]) {
      assert.equal(r.stages[0]![0], STAGE.loadModel);
      assert.deepEqual(r.stages[1]!.slice(0, 2), [STAGE.loadModel, STAGE.loadTextEncoder]);
    }
    assert.equal(up.moved?.event, 'blocks to host');
    assert.equal(down.moved?.event, 'blocks resident');
    assert.equal(up.moved!.bytes, down.loaded, 'sent to host: the bytes of a load for the big job');
    assert.equal(down.moved!.bytes, up.loaded, 'back on the GPU: the bytes of a load for the small one');
    // a fresh load's file and the one after the other job are the same bytes
    assert.equal(up.files[0], down.files[1], 'the small job, fresh and after the big one');
    assert.equal(up.files[1], down.files[0], 'the big job, fresh and after the small one');
    assert.notEqual(up.files[0], up.files[1]);
  });

  test('a job that needs no move moves nothing: no load stage, the same bytes held', async () => {
    reports.length = 0;
    const p = new MiniMaxH3Pipeline(options());
    try {
      await p.load(context().ctx, big('same-1'));
      traces.length = 0;
      const b = context();
      await p.prepare(b.ctx, big('same-2'));
      assert.deepEqual(b.stages, []);
      assert.deepEqual(traces, []);
    } finally {
      await p.unload();
    }
  });
});
