// Nothing leaks from MiniMax H3 jobs (issue 42, memory ownership; leak.test.ts does the image models): on the demo
// checkpoint at its smallest size, each kind of job (a reference picture: the Ref2VA DiT swapped in, the text encoder,
// the video VAE's encoder and both decoders; a soundtrack: the FL2VA DiT swapped back, the audio VAE's encoder; one
// cancelled between sampling steps; one cancelled while the video decodes) leaves the pool's bytes in
// use exactly where the load left them (what the model holds), and unload() gives back every byte the load took. A
// forward, stage or VAE that drops a temporary fails here with the bytes it kept.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { loadH3Transformer } from '../../src/models/minimax_h3/variants';
import { pngBytes, stereoWavBytes } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { demoH3Root } from './minimax_h3-demo-root';
import { recordingContext } from './run-context';

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-leak-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const inUse = (e: Engine) => e.pool.stats().inUseBytes;

describe('no GPU memory leaks across MiniMax H3 jobs on the demo checkpoint', () => {
  let e: Engine;
  let root: string;
  before(async () => {
    e = await testEngine();
    root = await demoH3Root(e, join(dir, 'demo'));
    writeFileSync(join(dir, 'picture.png'), await pngBytes(80, 60));
    writeFileSync(join(dir, 'clip.wav'), stereoWavBytes(0.5));
  });

  test('each job leaves the bytes the model holds; unload gives back what the load took', async () => {
    // basevid50: the demo has no adapter files, and its Ref2VA partition needs none
    const pipe = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root),
      loadTransformer: (en, dirs, o) => loadH3Transformer(en, 'basevid50', { transformer: dirs.transformer, transformerRef: dirs.transformerRef }, o),
    });
    let n = 0;
    // the smallest size the demo's VAEs take (64 x 64, 22 frames: 7 latent frames), 2 steps
    const task = (over: Partial<H3Task> = {}): H3Task => ({
      prompt: 'a kite', seed: 3, steps: 2, width: 64, height: 64, frames: 22, images: [], audios: [], outputPath: join(dir, `out-${++n}.mp4`), ...over,
    });
    const start = inUse(e);
    try {
      await pipe.load(recordingContext());
      await e.sync();
      const loaded = inUse(e) - start;
      assert.ok(loaded > 0, 'the load holds the weights');
      assert.equal(loaded, pipe.residentBytes, 'the bytes the model says it holds');
      const jobs: [string, H3Task, ((max: number, frames: number) => boolean)?][] = [
        ['a reference picture', task({ images: [join(dir, 'picture.png')], imageMode: 'reference' })],
        ['a soundtrack', task({ audios: [join(dir, 'clip.wav')], audioMode: 'track' })],
        ['cancelled while sampling', task({ steps: 3 }), (max) => max === 3],
        ['cancelled while the video decodes', task(), (max, frames) => max === frames],
      ];
      for (const [what, t, cancelAt] of jobs) {
        if (cancelAt) {
          const abort = new AbortController();
          const ctx = recordingContext({ signal: abort.signal });
          const progress = ctx.progress;
          await assert.rejects(pipe.run(t, { ...ctx, progress: (v, m) => (progress(v, m), cancelAt(m, t.frames!) && abort.abort()) }), CancelledError, what);
        } else {
          await pipe.run(t, recordingContext());
        }
        await e.sync();
        assert.equal(inUse(e) - start, pipe.residentBytes, `${what}: bytes in use after the job less before the load`);
        // the FL2VA DiT again after the reference job: the load's bytes
        if (!t.images.length) assert.equal(inUse(e) - start, loaded, `${what}: bytes in use after the job less before the load`);
      }
    } finally {
      await pipe.unload();
    }
    assert.equal(inUse(e) - start, 0, 'bytes in use after unload less before the load');
  });
});
