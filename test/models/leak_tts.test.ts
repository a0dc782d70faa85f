// Nothing leaks in speech (issue 42, memory ownership), as leak.test.ts checks the image models: on the Qwen3-TTS demo
// checkpoint every job (in-context cloning with a ref_text over two text chunks: the speaker encoder, the codec
// encoder, talker, code predictor and codec decoder all run; one cancelled between frames) leaves the pool's bytes in use exactly where the load left them, and unload() gives back every byte
// the load took. A forward that drops a temporary (a talker or code-predictor step, the speaker encoder, the codec
// encoder or decoder) or a part that forgets a weight in free() fails here with the bytes it kept. Frames are capped
// (maxNewTokens 3) so a job is a few frames: what is checked is the bookkeeping, not the speech.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import { planDemoQwen3Tts } from '../../src/models/qwen3_tts/demo';
import { Qwen3TtsPipeline, type Qwen3TtsTask } from '../../src/models/qwen3_tts/pipeline';
import { wavBytes } from '../api/inputs';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';

const inUse = (e: Engine) => e.pool.stats().inUseBytes;

describe('no GPU memory leaks across whole speech jobs on the Qwen3-TTS demo checkpoint', () => {
  let e: Engine;
  let dir: string;
  let clip: string;
  before(async () => {
    e = await testEngine();
    dir = mkdtempSync(join(tmpdir(), 'kiln-leak-tts-'));
    await (await planDemoQwen3Tts(e)).write(join(dir, 'tts'));
    clip = join(dir, 'clip.wav');
    writeFileSync(clip, wavBytes(3, 16000)); // 3 s at 16 kHz: resampled to 24 kHz on the way in
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('Qwen3-TTS: each job leaves the bytes the load left; unload gives back what the load took', async () => {
    const pipe = new Qwen3TtsPipeline({ engine: async () => e, checkpoint: async () => join(dir, 'tts'), chunkUnits: 12, generation: { maxNewTokens: 3 } });
    const task = (o: Partial<Qwen3TtsTask>): Qwen3TtsTask => ({
      text: 'Hi.', language: 'English', refText: '', refAudioPath: clip, outputPath: join(dir, `out-${Math.random().toString(36).slice(2)}.wav`), seed: 7, ...o,
    });
    const jobs: [string, Qwen3TtsTask][] = [
      ['in-context with a ref_text, two chunks', task({ text: 'One two three. Four five six.', refText: 'A reference clip.' })],
      ['cancelled', task({ text: 'This one is cancelled.' })],
    ];
    const start = inUse(e);
    try {
      await pipe.load(recordingContext());
      await e.sync();
      const loaded = inUse(e);
      assert.ok(loaded > start, 'the load holds the weights');
      for (const [what, t] of jobs) {
        if (what === 'cancelled') {
          const abort = new AbortController();
          const run = pipe.run(t, recordingContext({ signal: abort.signal, onProgress: () => abort.abort('interrupted') }));
          await assert.rejects(run, (err: unknown) => err === 'interrupted' || err instanceof CancelledError);
        } else {
          await pipe.run(t, recordingContext());
        }
        await e.sync();
        assert.equal(inUse(e) - loaded, 0, `Qwen3-TTS, ${what}: bytes in use after the job less after the load`);
      }
    } finally {
      await pipe.unload();
    }
    assert.equal(inUse(e) - start, 0, 'Qwen3-TTS: bytes in use after unload less before the load');
  });
});
