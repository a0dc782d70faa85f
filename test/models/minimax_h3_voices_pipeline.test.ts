// Voice jobs (audio_mode voice with reference pictures, the Ref2VA partition) through the MiniMax H3 pipeline on the
// demo checkpoint: each clip is read at its own rate, truncated to the video's length there, made stereo and resampled
// to 32 kHz as upstream (prepareVoice, golden voice_prep), encoded by the demo's audio VAE encoder into clean audio
// rows that follow the picture blocks, and the sampler leaves those rows exactly as uploaded; the text encoder reads
// "<Audio j>: " labels (the demo has no vision tower, so the pictures are not shown to it) before the prompt with its
// <Picture n> / <Audio n> definitions; voices without pictures, 4 voices and a file that is not audio are BadInputErrors
// before sampling. A soundtrack beside the pictures (audio_mode track's clip, or tts_text's speech) goes the same way
// as <Audio 1>, defined as fully_copy, and the mp4 carries the clip itself (conditioning/audio.ts).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { referencePrompt, STAGE, type Stage } from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import type { Engine } from '../../src/engine/engine';
import type { RunContext } from '../../src/models/common/pipeline';
import { h3DirsFromRoot, MiniMaxH3Pipeline, type H3PipelineOptions, type H3Task } from '../../src/models/minimax_h3/pipeline';
import { ref2vaPresentation } from '../../src/models/minimax_h3/text-encoder/presentation';
import { loadH3Transformer, type H3Partition } from '../../src/models/minimax_h3/variants';
import { encodeVoices, prepareVoice, voiceSamples } from '../../src/models/minimax_h3/conditioning/voice-inputs';
import { readTrack } from '../../src/models/minimax_h3/conditioning/track-inputs';
import { TextTokenizer } from '../../src/models/tokenizer';
import { wavHeader } from '../../src/media/wav';
import { demoH3Root } from './minimax_h3-demo-root';
import { testEngine } from '../engine/helpers';
import { recordingContext } from './run-context';
import { countVideoFrames, probe } from '../media/helpers';

const W = 96;
const H = 64;
const FRAMES = 22; // 0.917 s

const dir = mkdtempSync(join(tmpdir(), 'kiln-h3-voices-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function context(): { ctx: RunContext; stages: Stage[] } {
  const stages: Stage[] = [];
  return { ctx: recordingContext({ stages, distinct: true }), stages };
}

/** A 16-bit wav of `channels` channels at `rate` (tones and a little deterministic noise) and its samples as float
 * (x / 32768: what ffmpeg decodes it to). */
function voiceWav(path: string, seconds: number, rate: number, channels: 1 | 2, hz: number): Float32Array[] {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 2 * channels);
  const planar = Array.from({ length: channels }, () => new Float32Array(n));
  let s = 12345;
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < channels; c++) {
      s = (s * 1103515245 + 12345) % 2147483648;
      const v = Math.round(7000 * Math.sin((2 * Math.PI * hz * (c + 1) * i) / rate) + (s / 2147483648 - 0.5) * 2000);
      data.writeInt16LE(v, (i * channels + c) * 2);
      planar[c]![i] = v / 32768;
    }
  }
  writeFileSync(path, Buffer.concat([wavHeader(rate, channels, n), data]));
  return planar;
}

type Voices = Parameters<NonNullable<H3PipelineOptions['onVoices']>>[0];
type Refs = Parameters<NonNullable<H3PipelineOptions['onReferences']>>[0];

describe('MiniMax H3 voice jobs on the demo checkpoint', () => {
  let e: Engine;
  let root: string;
  let out: string;
  let tok: TextTokenizer;
  let picture: string;
  const loads: H3Partition[] = [];
  let seen: { voices: Voices | null; refs: Refs | null; ids: readonly number[] | null; audioDecoded: boolean };
  let pipeline: MiniMaxH3Pipeline;
  const reset = () => (seen = { voices: null, refs: null, ids: null, audioDecoded: false });
  const task = (id: string, over: Partial<H3Task> = {}): H3Task => ({
    prompt: 'a woman says hello on a beach', seed: 11, steps: 2, width: W, height: H, frames: FRAMES, images: [picture],
    imageMode: 'reference', audios: [], audioMode: 'voice', outputPath: join(out, `${id}.mp4`), ...over,
  });

  before(async () => {
    e = await testEngine();
    root = await demoH3Root(e, join(dir, 'demo'));
    out = join(dir, 'out');
    mkdirSync(out);
    picture = join(dir, 'face.png');
    writeFileSync(picture, await sharp({ create: { width: 80, height: 60, channels: 3, background: { r: 180, g: 90, b: 40 } } }).png().toBuffer());
    tok = await TextTokenizer.fromDir(h3DirsFromRoot(root).tokenizer);
    reset();
    pipeline = new MiniMaxH3Pipeline({
      engine: async () => e,
      dirs: async () => h3DirsFromRoot(root),
      loadTransformer: (eng, dirs, o) => {
        loads.push(o.partition);
        return loadH3Transformer(eng, 'basevid50', { transformer: dirs.transformer, transformerRef: dirs.transformerRef }, { dtype: o.dtype, partition: o.partition });
      },
      onVoices: (v) => (seen.voices = v),
      onReferences: (r) => (seen.refs = r),
      onText: (t) => (seen.ids = t.ids),
      onAudio: () => (seen.audioDecoded = true),
    });
  });

  test('a picture + 1 voice (16 kHz mono, longer than the video): prepared as upstream, the encoder\'s rows held clean, "<Audio 1>: " before the prefixed prompt', async () => {
    const wav = join(dir, 'v16k.wav');
    const pcm = voiceWav(wav, 2.5, 16000, 1, 300);
    const { ctx, stages } = context();
    const t = task('one', { audios: [wav] });
    const t0 = Date.now();
    await pipeline.run(t, ctx);
    console.log(`# 1 picture + 1 voice on a 96x64 22-frame job, 2 steps: ${((Date.now() - t0) / 1000).toFixed(1)} s with the demo's loads`);
    assert.deepEqual(stages, [STAGE.loadModel, STAGE.loadTextEncoder, STAGE.encode, STAGE.sample, STAGE.videoDecode, STAGE.audioDecode, STAGE.package, STAGE.save]);
    assert.deepEqual(loads, ['fl2va', 'ref2va'], 'voices run on the Ref2VA partition');
    const v = seen.voices!;
    assert.ok(v && seen.refs, 'voice rows after the picture rows');
    // read at 16 kHz, cut to int(22 / 24 x 16000) = 14666 samples there, then 32 kHz stereo: 29332 samples
    assert.equal(voiceSamples(FRAMES, 16000), 14666);
    assert.deepEqual([v.voices[0]!.sourceRate, v.voices[0]!.sourceSamples], [16000, 40000]);
    assert.deepEqual(v.voices[0]!.channels, prepareVoice(pcm, 16000, FRAMES));
    assert.equal(v.voices[0]!.channels[0].length, 29332);
    // the rows are the demo encoder's rows of that waveform (ceil(29332 / 800) = 37 latents per channel, both channels)
    const again = await encodeVoices(e, h3DirsFromRoot(root).audioVae, v.voices);
    assert.equal(v.encoded[0]!.latents, 37);
    assert.deepEqual(v.rows, again[0]!.rows);
    assert.equal(v.rows.length, 2 * 37 * 32);
    assert.deepEqual(v.after, v.rows, 'the sampler never wrote a voice row');
    assert.deepEqual(seen.refs!.after, seen.refs!.rows, 'nor a picture row');
    // the text: "<Audio 1>: " then the prompt with both definitions (no tower on the demo: no picture block)
    const prompt = referencePrompt(t.prompt, 1, 1);
    assert.equal(prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n<Audio 1> is the voice-timbre reference for the speaker (S1); the dialogue follows its voice timbre without copying the original signal.\n${t.prompt}`);
    assert.equal(seen.refs!.prompt, prompt);
    assert.deepEqual(seen.ids, ref2vaPresentation(tok, prompt, [{ kind: 'audio' }]).ids);
    assert.deepEqual(seen.ids, [...tok.encode('<Audio 1>: '), ...tok.encode(prompt)]);
    // the mp4's sound is generated (a voice is not the soundtrack): decoded by the audio VAE
    assert.ok(seen.audioDecoded, 'the generated audio is decoded');
    const p = probe(t.outputPath);
    assert.deepEqual([p.video?.codec, p.video?.width, p.video?.height, p.video?.fps], ['h264', W, H, 24]);
    assert.deepEqual([p.audio?.codec, p.audio?.sampleRate, p.audio?.layout], ['aac', 32000, 'stereo']);
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
  });

  test('2 voices (44.1 kHz stereo cut, 8 kHz mono whole) in request order, a prompt naming <Audio 2> gets the other definitions', async () => {
    reset();
    const a = join(dir, 'v44k.wav');
    const b = join(dir, 'v8k.wav');
    const pa = voiceWav(a, 2.2, 44100, 2, 200);
    const pb = voiceWav(b, 0.5, 8000, 1, 500);
    const t = task('two', { audios: [a, b], prompt: 'the man speaks in the voice of <Audio 2>', seed: 3 });
    await pipeline.run(t, context().ctx);
    const v = seen.voices!;
    assert.deepEqual(v.voices.map((x) => [x.sourceRate, x.sourceSamples]), [[44100, 97020], [8000, 4000]]);
    assert.deepEqual(v.voices[0]!.channels, prepareVoice(pa, 44100, FRAMES), 'stereo kept, cut at int(22 / 24 x 44100) = 40425');
    assert.deepEqual(v.voices[1]!.channels, prepareVoice(pb, 8000, FRAMES), 'shorter than the video: whole, x4');
    assert.notDeepEqual(v.voices[0]!.channels[0], v.voices[0]!.channels[1], 'the stereo voice keeps its two channels');
    assert.deepEqual(v.encoded.map((x) => x.latents), [Math.ceil(29334 / 800), Math.ceil(16000 / 800)]);
    assert.deepEqual(v.rows, Float32Array.from([...v.encoded[0]!.rows, ...v.encoded[1]!.rows]), 'voice 1\'s rows, then voice 2\'s');
    assert.deepEqual(v.after, v.rows);
    assert.equal(seen.refs!.prompt, referencePrompt(t.prompt, 1, 2));
    assert.match(seen.refs!.prompt, /^<Picture 1> is a reference image: .*\n<Audio 1> is the voice-timbre reference for the speaker \(S1\); [^\n]*\nthe man speaks in the voice of <Audio 2>$/);
    assert.deepEqual(seen.ids, ref2vaPresentation(tok, seen.refs!.prompt, [{ kind: 'audio' }, { kind: 'audio' }]).ids);
    assert.equal(countVideoFrames(t.outputPath), FRAMES);
  });

  test('a picture + a soundtrack (a 22.05 kHz track clip, then tts_text\'s speech): <Audio 1> prepared as a voice, fully_copy, the clip muxed', async () => {
    for (const spoken of [false, true]) {
      reset();
      const wav = join(dir, spoken ? 'speech24k.wav' : 'track22k.wav');
      const rate = spoken ? 24000 : 22050;
      const pcm = voiceWav(wav, spoken ? 1.2 : 2.5, rate, 1, 250);
      let spokeAt: Stage | null = null;
      const { ctx, stages } = context();
      const t = task(spoken ? 'speech-ref' : 'track-ref', spoken
        ? { audios: [], audioMode: 'voice', speech: async () => ((spokeAt = stages.at(-1)!), wav) }
        : { audios: [wav], audioMode: 'track' });
      await pipeline.run(t, ctx);
      if (spoken) assert.equal(spokeAt, STAGE.encode, 'the speech is made inside 编码提示词/图片');
      assert.equal(loads.at(-1), 'ref2va');
      const v = seen.voices!;
      assert.ok(v && seen.refs, `${wav}: an audio reference after the picture`);
      assert.deepEqual(v.voices[0]!.channels, prepareVoice(pcm, rate, FRAMES), 'prepared as a voice (cut at the video\'s length, 32 kHz stereo)');
      assert.deepEqual(v.rows, (await encodeVoices(e, h3DirsFromRoot(root).audioVae, v.voices))[0]!.rows);
      assert.deepEqual(v.after, v.rows, 'held clean through sampling');
      // the mp4 carries the clip fitted to the video (cut, or padded with silence), not decoded model audio
      assert.deepEqual(v.track, await readTrack(wav, FRAMES));
      assert.equal(seen.audioDecoded, false);
      const prompt = referencePrompt(t.prompt, 1, 0, true);
      assert.equal(prompt, `<Picture 1> is a reference image: follow its subjects and style; the video does not start on it.\n<Audio 1> is the soundtrack: fully_copy - <Audio 1> is reused 1:1 as the target video's complete final audio track.\n${t.prompt}`);
      assert.equal(seen.refs!.prompt, prompt);
      assert.deepEqual(seen.ids, ref2vaPresentation(tok, prompt, [{ kind: 'audio' }]).ids);
      assert.equal(countVideoFrames(t.outputPath), FRAMES);
    }
  });

  test('voices without pictures, 4 voices and a file that is not audio: BadInputError before sampling', async () => {
    const ok = join(dir, 'ok.wav');
    voiceWav(ok, 2, 16000, 1, 400);
    const bad = join(dir, 'bad.wav');
    writeFileSync(bad, 'plain text, not a voice');
    const cases: [Partial<H3Task>, RegExp][] = [
      [{ images: [], audios: [ok] }, /voices \(audio_mode voice\) need at least one reference picture/],
      [{ imageMode: 'keyframe', audios: [ok] }, /voices \(audio_mode voice\) need at least one reference picture/],
      [{ audios: [ok, ok, ok, ok] }, /4 voices given, at most 3/],
      [{ audios: [ok, bad] }, /^audios\[1\]: not a decodable audio file/],
    ];
    for (const [over, re] of cases) {
      const { ctx, stages } = context();
      await assert.rejects(pipeline.run(task('bad', over), ctx), (err: unknown) => err instanceof BadInputError && re.test(err.message));
      assert.ok(!stages.includes(STAGE.sample), `${re}: stopped before sampling`);
    }
    await pipeline.unload();
  });
});
