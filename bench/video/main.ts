// npm run bench:video [-- --layers N] [--width-div K] [--cases 480p:5,768p:10] [--aspect 16:9] [--text-tokens N] [--steps N]
//                     [--keyframes N | --references N [--voices M] [--picture-sizes WxH,..] [--tokenizer DIR]] [--no-int8] [--vae-layers N] [--audio-seconds S] [--skip-transformer|--skip-vae|--skip-audio]
// MiniMax H3 at the released sizes (test/fixtures/golden/minimax_h3/configs/transformer.json, video_vae/real-config.json,
// bench/video/configs/audio_vae.json) with random weights made in memory (SyntheticCheckpoint + WeightSynth, f16 source
// values; the DiT's linears int8 per output channel unless --no-int8), through the service's loaders, packed sequence, sampler
// and VAE decoders. Measures, after one warm-up forward that compiles every kernel:
//   transformer step   one sampleH3 step (AdaLN tables + forward + both Euler updates) per case, at the case's real
//                      packed sequence (text rows + 2 x audio latents + video rows); with --layers N < 50 also the
//                      per-block time and the step extrapolated to 50 blocks (step - N x block + 50 x block)
//   video VAE decode   one released 256 x 256 px tile of one temporal clip (7 latent frames), and each case's decode
//                      extrapolated by its clip x tile count (tiles are independent and equal in cost)
//   audio VAE decode   the case's stereo latents (or --audio-seconds) to 32 kHz
//   peak GPU memory    the pool's peak bytes in use after each phase (weights included; phases run in order)
//   --keyframes N      a keyframe job's longer sequence (keyframes.ts: N latent frames of conditioning rows; with 1-2
//                      also their vision blocks in the text, (H/32)(W/32) pads + 2 + ~6 label tokens each), and the
//                      video VAE encoder (f32, released tiling) on one keyframe at each case's size (--encoder-div K:
//                      its channels / K; --skip-vae-encoder)
//   --references N     a reference job's (Ref2VA) sequence with N pictures and --voices M voices ahead of the target
//   --voices M         (references.ts: the Ref2VA presentation's labels and vision blocks in the text, each picture on
//                      its match canvas, each voice the video's length), the video VAE encoder per picture canvas
//                      (--encoder-div, --skip-vae-encoder) and the audio VAE encoder per voice (--skip-audio-encoder);
//                      --tokenizer DIR counts the labels with a real tokenizer (default: 6 tokens each, approx.)
// npm run bench:video -- --job [--root DIR] [--references N] [--voices M] ...: one whole reference job through the
//   service's pipeline instead (job.ts: per-stage wall time and peak memory)
// --layers N keeps N of the 50 blocks (lavapipe: 1, with small --cases such as 352p:1); --vae-layers N keeps N of
// the 36 ViT blocks (the decode then takes about N/36 of the blocks' share); --width-div K divides the DiT's widths
// (lavapipe cannot bind the released adaln_proj / FFN matrices: 128 MiB per binding).
import { join, resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { Engine } from '../../src/engine/engine';
import { snapFrames, VIDEO_SIZES } from '../../src/catalog';
import { WeightSynth } from '../../src/models/common/random-weights';
import { SyntheticCheckpoint } from '../../src/models/common/synthetic-checkpoint';
import { AudioVaeDecoder, parseAudioVaeConfig } from '../../src/models/minimax_h3/vae/audio';
import { parseH3Config } from '../../src/models/minimax_h3/transformer/config';
import { buildKeyframeSequence } from '../../src/models/minimax_h3/sequence/keyframes';
import { TextTokenizer } from '../../src/models/tokenizer';
import { runJob } from './job';
import { approximateLabels, benchReferenceEncoders, parseSizes, referenceLayout, type ReferenceLayout, type ReferenceSpec } from './references';
import { imageTokenCount } from '../../src/models/minimax_h3/text-encoder/presentation';
import { resolveGeometry, TEXT_TAG, VIDEO_TAG, type Geometry } from '../../src/models/minimax_h3/sequence/packed-sequence';
import { copyInto } from '../../src/engine/ops/layout';
import { patchify } from '../../src/models/minimax_h3/transformer/patchify';
import { audioRows, gaussianNoise, h3Noise } from '../../src/models/minimax_h3/pipeline';
import { sampleH3 } from '../../src/models/minimax_h3/sampler/sampler';
import { MiniMaxH3Transformer } from '../../src/models/minimax_h3/transformer/transformer';
import { decodePlan, normalizePixels, parseVideoVaeConfig, parseVideoVaeEncoderConfig, RELEASED_TILING, splitTiles, VideoVaeDecoder, VideoVaeEncoder } from '../../src/models/minimax_h3/vae/video';

/** "<Picture i>: " in the released tokenizer, about (the vision block's rows dominate). */
const PICTURE_LABEL_TOKENS = 6;

const args = process.argv.slice(2);
const arg = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const has = (name: string) => args.includes(name);

const now = () => performance.now();
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

interface Case {
  label: string;
  width: number;
  height: number;
  geo: Geometry;
}

function parseCases(spec: string, aspect: string): Case[] {
  return spec.split(',').map((c) => {
    const [res, sec] = c.split(':');
    const size = VIDEO_SIZES[aspect]?.[res!];
    if (!size || !(Number(sec) > 0)) throw new Error(`--cases: "${c}" must be <res>:<seconds> with res one of ${Object.keys(VIDEO_SIZES[aspect] ?? {}).join(', ')}`);
    const [width, height] = size;
    return { label: `${res} ${sec} s`, width, height, geo: resolveGeometry(snapFrames(Number(sec)), height, width) };
  });
}

async function main(): Promise<void> {
  if (has('--job')) return runJob(args);
  const root = resolve('.'); // npm runs scripts from the package root
  const json = (p: string) => JSON.parse(readFileSync(join(root, p), 'utf8')) as Record<string, unknown>;
  const full = parseH3Config(json('test/fixtures/golden/minimax_h3/configs/transformer.json'), 'transformer config');
  const layers = Number(arg('--layers') ?? full.numLayers);
  // --width-div K: hidden, heads, FFN and time-embedding widths / K (head_dim, RoPE, text_dim kept). Only for adapters
  // whose binding limit is below the released tensors (lavapipe: 128 MiB < adaln_proj's 248 MiB in int8).
  const div = Number(arg('--width-div') ?? 1);
  const w = (n: number) => Math.round(n / div);
  const config = { ...full, numLayers: layers, hiddenSize: w(full.hiddenSize), numHeads: w(full.numHeads), ffnDim: w(full.ffnDim), timeEmbedHiddenDim: w(full.timeEmbedHiddenDim), timeEmbedDim: w(full.timeEmbedDim) };
  const int8 = !has('--no-int8');
  const cases = parseCases(arg('--cases') ?? '480p:5,768p:10', arg('--aspect') ?? '16:9');
  const textTokens = Number(arg('--text-tokens') ?? 128);
  const steps = Number(arg('--steps') ?? 1);
  const keyframes = Number(arg('--keyframes') ?? 0);
  const references = Number(arg('--references') ?? 0);
  const refSpec: ReferenceSpec = { pictures: references, voices: Number(arg('--voices') ?? 0), pictureSizes: parseSizes(arg('--picture-sizes')) };
  if (refSpec.voices && !references) throw new Error('--voices needs --references N (voices come with reference pictures: the Ref2VA partition)');
  if (references && keyframes) throw new Error('--keyframes and --references are two kinds of job: one at a time');
  const labels = arg('--tokenizer') ? await TextTokenizer.fromDir(arg('--tokenizer')!) : approximateLabels(PICTURE_LABEL_TOKENS);
  const audioVaeJson = json('bench/video/configs/audio_vae.json');
  // the keyframes' / references' video VAE encoder config, --encoder-div K dividing its channels (lavapipe: the
  // released widths take minutes per frame), parsed here so a K its GroupNorm cannot take fails before the DiT runs
  const encoderDiv = Number(arg('--encoder-div') ?? 1);
  const vaeJson = json('test/fixtures/golden/minimax_h3/video_vae/real-config.json');
  const encoderConfig = (keyframes || references) && !has('--skip-vae-encoder') ? { ...vaeJson, block_out_channels: (vaeJson.block_out_channels as number[]).map((n) => n / encoderDiv) } : null;
  if (encoderConfig) parseVideoVaeEncoderConfig(encoderConfig, `video VAE encoder config with --encoder-div ${encoderDiv}`);
  const layouts = new Map<Case, ReferenceLayout>();
  if (references) for (const c of cases) layouts.set(c, referenceLayout(c, refSpec, { textTokens, patch: config.patchSize, labels, audioVaeConfig: audioVaeJson }));

  const e = await Engine.create({ allowSoftware: true });
  const d = e.describe();
  const dtype = e.gpu.hasFeature('shader-f16') ? 'f16' : 'f32';
  console.log(`adapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''})`);
  console.log(`date: ${new Date().toISOString()}  model: MiniMax H3 DiT ${layers}/${full.numLayers} blocks${div !== 1 ? `, widths / ${div} (hidden ${config.hiddenSize}, ${config.numHeads} heads, FFN ${config.ffnDim})` : ''}, ${int8 ? 'int8' : dtype} linears (${dtype} activations), random weights`);
  const synth = new WeightSynth(1);
  const peak = () => gib(e.pool.stats().peakInUseBytes);

  if (!has('--skip-transformer')) {
    let t0 = now();
    const ckpt = new SyntheticCheckpoint({ label: 'random transformer', dtype: 'F16', fill: synth.fill });
    const before = e.pool.stats().inUseBytes;
    const model = await MiniMaxH3Transformer.load(e, ckpt.checkpoint, config, { dtype, int8 });
    await e.sync();
    const weights = e.pool.stats().inUseBytes - before;
    console.log(`transformer load: ${fmt(now() - t0)} (random weights made and uploaded), ${gib(weights)} on the GPU (${gib((weights / Math.max(1, layers)) * full.numLayers)} at ${full.numLayers} blocks, approx.)`);
    for (const c of cases) {
      const { geo } = c;
      const ref = layouts.get(c);
      // FL2VA (1-2 keyframes) shows the pictures to the text encoder: their vision blocks lead the text rows
      const visionRows = ref ? ref.visionRows : keyframes >= 1 && keyframes <= 2 ? keyframes * (imageTokenCount(c.height, c.width) + 2 + PICTURE_LABEL_TOKENS) : 0;
      const textRows = ref ? ref.textTags.length : textTokens + visionRows;
      const textTags = ref?.textTags ?? new Uint8Array(textRows).fill(TEXT_TAG).fill(VIDEO_TAG, 0, visionRows);
      const packed = ref?.packed ?? buildKeyframeSequence({
        textTags, numLatentFrames: geo.numLatentFrames, latentHeight: geo.latentHeight,
        latentWidth: geo.latentWidth, numAudioLatents: geo.numAudioLatents, patchSize: config.patchSize,
      }, keyframes);
      const seq = model.prepare(packed);
      const embeds = e.upload(gaussianNoise(3, 2, textRows * config.textDim), [1, textRows, config.textDim], dtype, 'bench text');
      const text = model.encodeText(embeds);
      embeds.free();
      const noise = h3Noise(1, geo, config.inChannels, config.audioInChannels);
      const lat = e.upload(noise.video, [1, config.inChannels, geo.numLatentFrames, geo.latentHeight, geo.latentWidth], 'f32');
      let video = patchify(e, lat, config.patchSize);
      lat.free();
      const nc = packed.numConditionVideoRows;
      if (nc) {
        // the keyframes' / pictures' conditioning rows ahead of the target's (values do not matter for the timing)
        const [nv, width] = video.shape as [number, number];
        const rows = e.empty([nc + nv, width], 'f32', 'bench video rows');
        const cond = e.upload(gaussianNoise(6, 2, nc * width), [nc, width], 'f32');
        copyInto(e, cond, rows.slice(0, 0, nc));
        copyInto(e, video, rows.slice(0, nc, nc + nv));
        cond.free();
        video.free();
        video = rows;
      }
      // the voices' clean rows [nca, A] ahead of the target's noise rows [2 Na, A]
      const nca = packed.numConditionAudioRows;
      const audioInit = new Float32Array((nca + 2 * geo.numAudioLatents) * config.audioInChannels);
      audioInit.set(gaussianNoise(7, 2, nca * config.audioInChannels));
      audioInit.set(audioRows(noise.audio, 2, config.audioInChannels, geo.numAudioLatents), nca * config.audioInChannels);
      const audio = e.upload(audioInit, [nca + 2 * geo.numAudioLatents, config.audioInChannels], 'f32');
      try {
        t0 = now();
        await sampleH3(e, model, seq, text, video, audio, { steps: 2 });
        await e.sync();
        const warm = now() - t0;
        const times: number[] = [];
        let last = now();
        await sampleH3(e, model, seq, text, video, audio, {
          steps: steps + 1,
          onStep: async () => {
            await e.sync();
            times.push(now() - last);
            last = now();
          },
        });
        const step = times.reduce((a, b) => a + b, 0) / times.length;
        const kf = keyframes ? `, ${keyframes} keyframes: ${nc} conditioning video rows, ${visionRows} vision rows in the text` : '';
        const rf = ref
          ? `, ${references} references (${ref.canvases.map((cv) => `${cv.width}x${cv.height}`).join(', ')}) + ${refSpec.voices} voices: ${nc} picture rows, ${nca} voice rows, ${visionRows} vision rows in the text`
          : '';
        console.log(`${c.label} (${c.width}x${c.height}, ${geo.numFrames} frames${kf}${rf}): ${packed.length} rows (${textRows} text, ${packed.audioIndices.length} audio, ${packed.videoIndices.length} video); warm-up ${fmt(warm)}; step ${fmt(step)} (mean of ${times.length}); peak ${peak()}`);
        if (layers < full.numLayers && layers > 0) {
          // a step without blocks: the same sampler step on a copy of the model with none (shares the weights)
          const bare = Object.create(model, { transformer_blocks: { value: [] } }) as MiniMaxH3Transformer;
          const tb = now();
          await sampleH3(e, bare, seq, text, video, audio, { steps: 2 });
          await e.sync();
          const rest = now() - tb;
          const block = (step - rest) / layers;
          console.log(`  per block ${fmt(block)}, outside the blocks ${fmt(rest)} -> ${full.numLayers}-block step ~${fmt(rest + full.numLayers * block)} (extrapolated)`);
        }
      } finally {
        for (const t of [seq, text, video, audio]) t.free();
      }
    }
    model.free();
  }

  if (!has('--skip-vae')) {
    const raw = json('test/fixtures/golden/minimax_h3/video_vae/real-config.json');
    const vaeLayers = Number(arg('--vae-layers') ?? raw.decoder_num_layers);
    const cfg = parseVideoVaeConfig({ ...raw, decoder_num_layers: vaeLayers }, 'vae config');
    const ckpt = new SyntheticCheckpoint({ label: 'random vae', dtype: 'F16', fill: synth.fill });
    const before = e.pool.stats().inUseBytes;
    const vae = await VideoVaeDecoder.load(e, ckpt.checkpoint, cfg, { dtype });
    console.log(`video VAE: ${vaeLayers}/${raw.decoder_num_layers} blocks, ${dtype}, ${gib(e.pool.stats().inUseBytes - before)} on the GPU`);
    // one full 256 x 256 px tile of one clip (7 latent frames x 16 x 16 tokens): every tile of every clip costs
    // the same, so a video's decode is this x tiles x clips (plus host stitching, small next to it)
    const tile = { data: gaussianNoise(4, 1, 24 * 7 * 16 * 16), shape: [24, 7, 16, 16] as const };
    for await (const _ of vae.frames(tile)) void _; // compile
    const t0 = now();
    for await (const _ of vae.frames(tile)) void _;
    const perTile = now() - t0;
    console.log(`one tile (7 latent frames, 256x256 px -> 28 frames): ${fmt(perTile)}; peak ${peak()}`);
    for (const c of cases) {
      const tiles = splitTiles(c.height, RELEASED_TILING.tileHeight, RELEASED_TILING.minOverlapHeight, cfg.patch).starts.length
        * splitTiles(c.width, RELEASED_TILING.tileWidth, RELEASED_TILING.minOverlapWidth, cfg.patch).starts.length;
      const clips = decodePlan(cfg, c.geo.numLatentFrames).clips.length;
      console.log(`${c.label}: ${clips} clips x ${tiles} tiles -> decode ~${fmt(perTile * clips * tiles)} (extrapolated)`);
    }
    vae.free();
  }

  if (references) {
    await benchReferenceEncoders({
      e, synth, cases: cases.map((c) => ({ label: c.label, layout: layouts.get(c)! })), log: (l) => console.log(l), fmt, peak,
      videoVaeConfig: encoderConfig,
      audioVaeConfig: has('--skip-audio-encoder') ? null : audioVaeJson,
    });
  }

  if (keyframes > 0 && encoderConfig) {
    // the keyframe path's encoder: loaded for the job in f32 (upstream pins it), one frame per picture, tiled
    const cfg = encoderConfig;
    const ckpt = new SyntheticCheckpoint({ label: 'random vae encoder', dtype: 'F16', fill: synth.fill });
    const before = e.pool.stats().inUseBytes;
    const enc = await VideoVaeEncoder.load(e, ckpt.checkpoint, cfg);
    console.log(`video VAE encoder: channels ${(cfg.block_out_channels as number[]).join('/')}, f32, ${gib(e.pool.stats().inUseBytes - before)} on the GPU`);
    for (const c of cases) {
      const px = { data: Float32Array.from({ length: 3 * c.height * c.width }, (_, i) => (i * 7919) % 256), shape: [3, 1, c.height, c.width] as const };
      const t0 = now();
      const m = await enc.encode(normalizePixels(px));
      console.log(`one ${c.width}x${c.height} keyframe -> moments [${m.shape.join(', ')}]: ${fmt(now() - t0)} (x ${keyframes} keyframes per job); peak ${peak()}`);
    }
    enc.free();
  }

  if (!has('--skip-audio')) {
    const cfg = parseAudioVaeConfig(json('bench/video/configs/audio_vae.json'), 'audio_vae config');
    // weight-norm pairs as released, no stored filters (the engine makes its own taps)
    const ckpt = new SyntheticCheckpoint({ label: 'random audio_vae', dtype: 'F32', fill: synth.fill, has: (n) => !n.endsWith('.filter') && !(n.endsWith('.weight') && !n.startsWith('dec_in_proj.')) && !n.startsWith('dec_in_proj.weight_') });
    const vae = await AudioVaeDecoder.load(e, ckpt.checkpoint, cfg, { dtype: 'f32' });
    const secs = arg('--audio-seconds');
    const lengths = secs ? [{ label: `${secs} s`, n: Math.round(Number(secs) * 40) }] : cases.map((c) => ({ label: c.label, n: c.geo.numAudioLatents }));
    for (const [i, l] of lengths.entries()) {
      const lat = gaussianNoise(5, 1, 2 * 32 * l.n);
      if (i === 0) await vae.decode(e, gaussianNoise(5, 1, 2 * 32 * 8), [2, 32, 8]); // compile
      const t0 = now();
      const out = await vae.decode(e, lat, [2, 32, l.n]);
      console.log(`audio VAE ${l.label}: ${l.n} latents -> ${out.samples} samples x 2 in ${fmt(now() - t0)}; peak ${peak()}`);
    }
    vae.free();
  }
  await e.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
