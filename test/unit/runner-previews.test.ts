// Live previews in the worker's runner (issue 46): with previews on, a pipeline's ctx.preview reports a `preview`
// event (the webp as base64) for its task; with them off (PREVIEWS=false) ctx.preview is absent, so pipelines compute
// nothing for previews.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunContext } from '../../src/models/common/pipeline';
import type { ServedEntry } from '../../src/worker/registry';
import { job, runnerWith } from './runner-helpers';

function previewing(seen: boolean[]): ServedEntry {
  return {
    kind: 'video', profile: 'a', weights: () => 'demo',
    create: () => ({
      load: async () => undefined,
      unload: async () => undefined,
      run: async (_task, ctx: RunContext) => {
        seen.push(ctx.preview !== undefined);
        ctx.preview?.({ step: 2, max: 4, webp: Buffer.from('RIFF-webp-bytes'), width: 256, height: 171 });
      },
    }),
  };
}

test('previews on: ctx.preview reports a preview event for the task; off: no ctx.preview and no event', async () => {
  for (const previews of [true, false]) {
    const seen: boolean[] = [];
    const { run, events } = runnerWith([previewing(seen)], { previews });
    assert.equal((await run(job('1'))).type, 'done');
    assert.deepEqual(seen, [previews]);
    const sent = events.filter((e) => e.type === 'preview');
    assert.deepEqual(sent, previews ? [{ type: 'preview', id: '1', step: 2, max: 4, width: 256, height: 171, webp: Buffer.from('RIFF-webp-bytes').toString('base64') }] : []);
  }
});
