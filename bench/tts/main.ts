// npm run bench:tts [-- --variant 1.7b|0.6b] [--layers N] [--frames N] [--text-tokens N] [--int8] [--codec f16|f32] [--icl]
//                   [--config-dir DIR]   (a checkpoint folder's config.json + speech_tokenizer/config.json)
// Qwen3-TTS at the real sizes (the released config.json files in test/fixtures/qwen3_tts_configs) with random weights
// generated in memory (models/common SyntheticCheckpoint + WeightSynth; nothing is written to disk), through the same
// loaders, prompt, generation loop and codec decoder as the service. Measures, after a 1-frame warm-up that compiles
// every kernel:
//   time to first audio   prompt embed + prefill + the first frame (talker + code predictor) + decoding that frame alone
//                         (what a streaming server would wait before its first 80 ms of sound)
//   frames/s              the generation loop after the first frame (eos is masked: exactly --frames frames)
//   real-time factor      (generation + codec decode) / seconds of audio; "x real time" is its inverse
//   decode GB/s           weight bytes one frame reads (talker layers + codec head, then 15 code predictor passes and
//                         their heads) / time per frame, against the adapter: the datasheet for known GPUs, and a
//                         measured copy (x + 0 over up to 256 MiB) as what the engine itself can stream here.
// --layers N keeps the first N talker layers (the frame time is then about N/28 of the talker's share), for slow
// adapters. --icl also times the codec encoder on a 3 s clip (reference codes for in-context cloning).
import { join, resolve } from 'node:path';
import { Engine } from '../../src/engine/engine';
import { add } from '../../src/engine/ops/elementwise';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import { qwen3TtsCheckpointHints } from '../../src/models/qwen3_tts/demo';
import { embedPrompt, freePromptEmbeds, generateCodes } from '../../src/models/qwen3_tts/generate';
import { loadQwen3TtsParts, readQwen3TtsConfigs, type Qwen3TtsConfigs } from '../../src/models/qwen3_tts/pipeline';
import { buildTalkerPrompt } from '../../src/models/qwen3_tts/prompt';
import { speakerEmbedding } from '../../src/models/qwen3_tts/speaker-encoder';
import type { Qwen3Config } from '../../src/models/qwen3/config';

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const variant = arg('--variant') ?? '1.7b';
const frames = Number(arg('--frames') ?? 24);
const textTokens = Number(arg('--text-tokens') ?? 32);
const int8 = args.includes('--int8');
const codecDtype = (arg('--codec') ?? 'f32') as 'f16' | 'f32';
const icl = args.includes('--icl');

/** Datasheet memory bandwidth (shared/spec/engine.md). */
const BANDWIDTH: { match: RegExp; label: string; GBs: number }[] = [{ match: /H200/i, label: 'H200 (datasheet)', GBs: 4800 }];

const now = () => performance.now();
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

/** Weight bytes one decode step of a Qwen3 decoder reads (its linears; norms are noise). */
function decoderStepBytes(c: Qwen3Config, bytesPerWeight: number): number {
  const attn = c.hiddenSize * c.headDim * (2 * c.numHeads + 2 * c.numKvHeads);
  const mlp = 3 * c.hiddenSize * c.intermediateSize;
  return c.numLayers * (attn + mlp) * bytesPerWeight;
}

function frameBytes(cfg: Qwen3TtsConfigs, bytesPerWeight: number): number {
  const t = cfg.model.talker;
  const cp = cfg.model.codePredictor;
  const steps = t.numCodeGroups - 1;
  const talker = decoderStepBytes(t, bytesPerWeight) + t.vocabSize * t.hiddenSize * bytesPerWeight;
  const projection = cp.hiddenSize !== t.hiddenSize ? cp.hiddenSize * t.hiddenSize * bytesPerWeight : 0;
  const predictor = steps * (decoderStepBytes(cp, bytesPerWeight) + projection + cp.vocabSize * cp.hiddenSize * bytesPerWeight);
  return talker + predictor;
}

/** What the engine can stream here: x + 0 over a 256 MiB f16 tensor (or the largest one binding allows), reading and
 * writing it, best of 5. */
async function copyBandwidth(e: Engine): Promise<number> {
  const n = Math.min(128 * 2 ** 20, Math.floor(e.pool.maxBindingBytes / 2));
  const x = e.empty([n], 'f16', 'bandwidth probe');
  let best = Infinity;
  for (let i = 0; i < 6; i++) {
    const t0 = now();
    const y = add(e, x, 0);
    await e.sync();
    if (i > 0) best = Math.min(best, now() - t0);
    y.free();
  }
  x.free();
  return (2 * n * 2) / (best / 1000) / 1e9;
}

/** The talker loads text_embedding [151936, 2048] as one GPU tensor; where that is over the binding limit (lavapipe:
 * 128 MiB) the bench keeps the rows that fit and moves the template ids into them. Returns the row count, or 0. */
function fitTextVocab(cfg: Qwen3TtsConfigs, maxBinding: number, bytes: number): number {
  const t = cfg.model.talker;
  if (t.textVocabSize * t.textHiddenSize * bytes <= maxBinding) return 0;
  const rows = Math.floor(maxBinding / (t.textHiddenSize * bytes));
  const top = rows - 1;
  cfg.model = {
    ...cfg.model,
    talker: { ...t, textVocabSize: rows },
    text: { imStart: top, imEnd: top - 1, assistant: top - 2, ttsPad: top - 3, ttsBos: top - 4, ttsEos: top - 5 },
  };
  return rows;
}

function promptIds(cfg: Qwen3TtsConfigs, n: number): number[] {
  const t = cfg.model.text;
  const text = Array.from({ length: n }, (_, i) => 1000 + ((i * 7919) % 20000)); // ordinary BPE ids
  return [t.imStart, t.assistant, 198, ...text, t.imEnd, 198, t.imStart, t.assistant, 198];
}

async function main(): Promise<void> {
  // npm runs scripts from the package root
  const dir = resolve(arg('--config-dir') ?? join('test/fixtures/qwen3_tts_configs', variant === '0.6b' ? 'Qwen3-TTS-12Hz-0.6B-Base' : 'Qwen3-TTS-12Hz-1.7B-Base'));
  const cfg = await readQwen3TtsConfigs(dir);
  const layers = Number(arg('--layers') ?? cfg.model.talker.numLayers);
  cfg.model = { ...cfg.model, talker: { ...cfg.model.talker, numLayers: layers } };

  const e = await Engine.create({ allowSoftware: true });
  const d = e.describe();
  const dtype = e.gpu.hasFeature('shader-f16') ? 'f16' : 'f32';
  console.log(`adapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''})`);
  console.log(`date: ${new Date().toISOString()}  model: Qwen3-TTS-12Hz ${variant}, talker ${layers}/28 layers, ${int8 ? 'int8' : dtype} linears, codec ${codecDtype}, random weights`);
  const rows = fitTextVocab(cfg, e.pool.maxBindingBytes, dtype === 'f16' ? 2 : 4);
  if (rows) console.log(`note: text_embedding cut to ${rows} rows (template ids moved below) to fit this adapter's ${e.pool.maxBindingBytes / 2 ** 20} MiB binding limit; it is only gathered (a few rows per request), so frame times are unaffected`);

  let t0 = now();
  const synth = new WeightSynth(1);
  const hints = qwen3TtsCheckpointHints(cfg);
  const model = new SyntheticCheckpoint({ label: 'random model.safetensors', dtype: 'F16', fill: synth.fill, ...hints.model });
  const speech = new SyntheticCheckpoint({ label: 'random speech_tokenizer', dtype: 'F32', fill: synth.fill, ...hints.speech });
  const before = e.pool.stats().inUseBytes;
  const parts = await loadQwen3TtsParts(e, model.checkpoint, speech.checkpoint, cfg, { dtype, int8, codecDtype, encoder: icl });
  await e.sync();
  const gpuBytes = e.pool.stats().inUseBytes - before;
  console.log(`load: ${fmt(now() - t0)} (random weights made and uploaded), ${(gpuBytes / 2 ** 30).toFixed(2)} GiB on the GPU`);

  const bw = await copyBandwidth(e);
  const sheet = BANDWIDTH.find((b) => b.match.test(d.name));
  console.log(`adapter bandwidth: ${bw.toFixed(1)} GB/s measured (copy)${sheet ? `, ${sheet.GBs} GB/s ${sheet.label}` : ', no datasheet figure for this adapter'}`);

  const clip = Float32Array.from({ length: 72000 }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / 24000) + 0.05 * Math.sin(i * 0.37));
  t0 = now();
  const spk = speakerEmbedding(e, parts.speaker, clip, 24000, { dtype: parts.talker.dtype });
  await e.sync();
  console.log(`speaker embedding (3 s clip): ${fmt(now() - t0)}`);
  if (parts.encoder) {
    await parts.encoder.encode(clip); // warm-up
    t0 = now();
    await parts.encoder.encode(clip);
    console.log(`codec encoder (3 s clip, ICL reference codes): ${fmt(now() - t0)}`);
  }

  const talkerPrompt = buildTalkerPrompt(cfg.model, { inputIds: promptIds(cfg, textTokens), languageId: cfg.model.talker.languageIds.english ?? null, mode: 'xvec' });
  const run = async (n: number) => {
    const start = now();
    const times: number[] = [];
    const prompt = embedPrompt(parts.talker, talkerPrompt, spk);
    try {
      // eos masked until the last token: exactly n frames
      const r = await generateCodes(parts.talker, prompt, { maxNewTokens: n + 1, minNewTokens: n + 1, seed: 1, onFrame: () => times.push(now()) });
      return { frames: r.frames, start, times };
    } finally {
      freePromptEmbeds(prompt);
    }
  };
  t0 = now();
  const warm = await run(1); // prefill, one frame, one decode step: every kernel the timed run uses
  await parts.decoder.decode(warm.frames);
  console.log(`warm-up (kernel compile, 1 frame): ${fmt(now() - t0)}`);

  const g = await run(frames);
  const firstFrame = g.times[0]! - g.start;
  t0 = now();
  await parts.decoder.decode(g.frames.slice(0, 1));
  const firstDecode = now() - t0;
  const loopMs = g.times[g.times.length - 1]! - g.times[0]!;
  const perFrame = loopMs / Math.max(1, g.times.length - 1);
  t0 = now();
  const wav = await parts.decoder.decode(g.frames);
  const decodeMs = now() - t0;
  const audioS = wav.length / cfg.speechTokenizer.outputSampleRate;
  const genMs = g.times[g.times.length - 1]! - g.start;
  const bytes = frameBytes(cfg, int8 ? 1 : dtype === 'f16' ? 2 : 4);
  const gbs = bytes / (perFrame / 1000) / 1e9;

  console.log(`prompt: ${talkerPrompt.rows.length} rows (${textTokens} text tokens, x-vector, streaming)`);
  console.log(`time to first audio: ${fmt(firstFrame + firstDecode)} (prefill + first frame ${fmt(firstFrame)}, decoding it ${fmt(firstDecode)})`);
  console.log(`generation: ${g.frames.length} frames, ${fmt(perFrame)}/frame after the first, ${(1000 / perFrame).toFixed(2)} frames/s (real time needs 12.5)`);
  console.log(`codec decode: ${fmt(decodeMs)} for ${audioS.toFixed(2)} s of audio (${(audioS / (decodeMs / 1000)).toFixed(1)}x real time)`);
  console.log(`real-time factor: ${((genMs + decodeMs) / 1000 / audioS).toFixed(2)} (${(audioS / ((genMs + decodeMs) / 1000)).toFixed(2)}x real time; goal >= 10x for 1.7B)`);
  console.log(`decode bandwidth: ${(bytes / 2 ** 20).toFixed(0)} MiB of weights per frame -> ${gbs.toFixed(1)} GB/s = ${((100 * gbs) / bw).toFixed(0)}% of the measured copy${sheet ? `, ${((100 * gbs) / sheet.GBs).toFixed(1)}% of ${sheet.label}` : ''}`);
  spk.free();
  parts.free();
  await e.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
