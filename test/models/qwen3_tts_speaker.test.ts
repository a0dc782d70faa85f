// The ECAPA-TDNN speaker encoder (src/models/qwen3_tts/speaker-encoder.ts) against upstream's Qwen3TTSSpeakerEncoder at
// the tiny config (test/fixtures/golden/qwen3_tts/speaker_encoder/): every block's output, mfa, the pooled statistics
// and the embedding, in f32 and f16 with the fixture's tolerances.
import { strict as assert } from 'node:assert';
import { after } from 'node:test';
import { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { parseQwen3TtsConfig } from '../../src/models/qwen3_tts/config';
import { SpeakerEncoder, type SpeakerDType } from '../../src/models/qwen3_tts/speaker-encoder';
import { expectClose, goldenTests, type GoldenCase } from './golden';

let engine: Promise<Engine> | null = null;
const getEngine = () => (engine ??= Engine.create({ debug: true, allowSoftware: true }));
after(async () => (await engine)?.destroy());

async function load(c: GoldenCase, dtype: SpeakerDType): Promise<{ e: Engine; enc: SpeakerEncoder }> {
  const e = await getEngine();
  const cfg = parseQwen3TtsConfig(c.config, c.path);
  return { e, enc: await SpeakerEncoder.load(e, c.ckpt, cfg.speakerEncoder, { dtype, prefix: 'weight.' }) };
}

for (const dtype of ['f32', 'f16'] as SpeakerDType[]) {
  goldenTests('qwen3_tts', 'speaker_encoder', async (c) => {
    const { e, enc } = await load(c, dtype);
    const tol = c.tol(dtype);
    const melH = await c.input('mel'); // [B, T, 128]
    const mel = e.upload(melH.data, melH.shape, 'f32');
    const r = enc.trace(e, mel);
    assert.equal(r.blocks.length, 4);
    // Upstream's intermediates are (B, C, T): compare our channels-last tensors transposed.
    const check = async (t: Tensor, name: string, transposed: boolean) =>
      expectClose(await e.read(transposed ? t.transpose(1, 2) : t), await c.output(name), tol, `${dtype} ${name}`);
    for (let i = 0; i < r.blocks.length; i++) await check(r.blocks[i]!, `block${i}`, true);
    await check(r.mfa, 'mfa', true);
    await check(r.asp, 'asp', false);
    assert.equal(r.embedding.dtype, dtype);
    await check(r.embedding, 'embedding', false);
    // forward() gives the same embedding without the trace.
    const again = enc.forward(e, mel);
    assert.deepEqual(await e.read(again), await e.read(r.embedding));
    for (const t of [mel, again, r.embedding, r.mfa, r.asp, ...r.blocks]) t.free();
    enc.free();
  }, dtype);
}
