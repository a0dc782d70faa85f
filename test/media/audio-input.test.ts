import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { BadInputError, CancelledError } from '../../src/common/errors';
import { CLIP_SECONDS } from '../../src/catalog';
import { decodeAudio, probeAudio } from '../../src/media/audio-input';
import { ffmpeg, rms, tempDir } from './helpers';

const dir = tempDir();
const file = (name: string) => readFileSync(join(dir, name));
const isBad = (re: RegExp) => (e: unknown) => e instanceof BadInputError && re.test(e.message);

// lavfi sine has amplitude 1/8: rms 0.0884
const SINE_RMS = 0.125 / Math.SQRT2;
const sine = (rate: number, seconds: number, hz = 440) => `sine=f=${hz}:r=${rate}:d=${seconds}`;

/** name -> [ffmpeg args producing it, expected container, codec, source rate, source channels, seconds] */
const FIXTURES: Record<string, [string[], RegExp, string, number, number, number]> = {
  'mono11025.wav': [['-f', 'lavfi', '-i', sine(11025, 2.5), '-c:a', 'pcm_s16le'], /^wav$/, 'pcm_s16le', 11025, 1, 2.5],
  'stereo44100.mp3': [['-f', 'lavfi', '-i', sine(44100, 3), '-ac', '2', '-c:a', 'libmp3lame'], /^mp3$/, 'mp3', 44100, 2, 3],
  'stereo48000.m4a': [['-f', 'lavfi', '-i', sine(48000, 2.5), '-ac', '2', '-c:a', 'aac'], /mp4/, 'aac', 48000, 2, 2.5],
  'adts22050.aac': [['-f', 'lavfi', '-i', sine(22050, 2.5), '-c:a', 'aac', '-f', 'adts'], /^aac$/, 'aac', 22050, 1, 2.5],
  'mono11025.flac': [['-f', 'lavfi', '-i', sine(11025, 2.5), '-c:a', 'flac'], /^flac$/, 'flac', 11025, 1, 2.5],
  'stereo48000.opus': [['-f', 'lavfi', '-i', sine(48000, 2.5), '-ac', '2', '-c:a', 'libopus', '-f', 'ogg'], /^ogg$/, 'opus', 48000, 2, 2.5],
  'mono44100.ogg': [['-f', 'lavfi', '-i', sine(44100, 2.5), '-c:a', 'libvorbis'], /^ogg$/, 'vorbis', 44100, 1, 2.5],
  'stereo48000.webm': [['-f', 'lavfi', '-i', sine(48000, 2.5), '-ac', '2', '-c:a', 'libopus', '-f', 'webm'], /matroska/, 'opus', 48000, 2, 2.5],
  // the audio track of a video file; video stream first so the audio is not stream 0
  'video.mp4': [['-f', 'lavfi', '-i', 'testsrc=s=64x48:r=24:d=2.5', '-f', 'lavfi', '-i', sine(44100, 2.5), '-c:v', 'libx264', '-c:a', 'aac', '-shortest'], /mp4/, 'aac', 44100, 1, 2.5],
};

before(() => {
  for (const [name, [args]] of Object.entries(FIXTURES)) ffmpeg([...args, join(dir, name)]);
  // left channel a tone, right channel silent
  ffmpeg(['-f', 'lavfi', '-i', sine(44100, 2.5), '-f', 'lavfi', '-i', 'anullsrc=r=44100:cl=mono', '-filter_complex', '[0:a][1:a]amerge=inputs=2,atrim=duration=2.5', '-c:a', 'pcm_s16le', join(dir, 'left.wav')]);
  ffmpeg(['-f', 'lavfi', '-i', sine(48000, 1.62), '-c:a', 'pcm_s16le', join(dir, 'short.wav')]);
  ffmpeg(['-f', 'lavfi', '-i', sine(16000, 16), '-c:a', 'libmp3lame', join(dir, 'long.mp3')]);
  ffmpeg(['-f', 'lavfi', '-i', sine(48000, 15), '-c:a', 'aac', join(dir, 'fifteen.m4a')]);
  ffmpeg(['-f', 'lavfi', '-i', 'testsrc=s=64x48:r=24:d=2.5', '-c:v', 'libx264', join(dir, 'silent.mp4')]);
});

describe('decodeAudio / probeAudio', () => {
  test('every format decodes to the requested rate and channels, with its exact length', async () => {
    for (const [name, [, container, codec, rate, channels, seconds]] of Object.entries(FIXTURES)) {
      const buf = file(name);
      const p = await probeAudio(buf, 'audios[0]');
      assert.match(p.container, container, name);
      assert.deepEqual([p.codec, p.sampleRate, p.channels], [codec, rate, channels], name);
      // lossy codecs pad their last frame; raw ADTS also keeps the encoder's 1024-sample priming
      assert.ok(Math.abs(p.durationS - seconds) < (name.endsWith('.aac') ? 0.1 : 0.05), `${name}: ${p.durationS} s`);

      for (const [outRate, outCh] of [[16000, 1], [32000, 2]] as const) {
        const a = await decodeAudio(buf, { label: 'audios[0]', sampleRate: outRate, channels: outCh });
        assert.equal(a.sampleRate, outRate);
        assert.equal(a.channels, outCh);
        assert.equal(a.layout, 'planar');
        assert.equal(a.shape[0], outCh);
        assert.equal(a.data.length, a.shape[0] * a.shape[1]);
        assert.equal(a.durationS, a.shape[1] / outRate);
        assert.ok(Math.abs(a.durationS - p.durationS) < 0.002, `${name}@${outRate}: ${a.durationS} vs ${p.durationS}`);
        // stereo fixtures were made with ffmpeg's -ac 2 (3 dB down per channel); mono is duplicated at unity
        // and stereo averaged, so the level is the source channel's level either way
        const want = channels === 2 ? SINE_RMS * Math.SQRT1_2 : SINE_RMS;
        const level = rms(a.data, { from: outRate * 0.2, to: outRate * 2 });
        assert.ok(Math.abs(level - want) < 0.01, `${name}@${outRate}/${outCh}: rms ${level}`);
      }
    }
  });

  test('without resampling the sample count is exactly what was encoded', async () => {
    const a = await decodeAudio(file('mono11025.wav'), { label: 'x', sampleRate: 11025, channels: 1 });
    assert.equal(a.shape[1], 27563); // lavfi rounds 27562.5 samples up
    assert.equal(a.durationS, 27563 / 11025);
    const f = await decodeAudio(file('mono11025.flac'), { label: 'x', sampleRate: 11025, channels: 1 });
    assert.deepEqual([...f.data.subarray(0, 500)], [...a.data.subarray(0, 500)]); // lossless
  });

  test('planar and interleaved layouts keep the channels apart', async () => {
    const buf = file('left.wav');
    const planar = await decodeAudio(buf, { label: 'x', sampleRate: 44100, channels: 2 });
    const n = planar.shape[1];
    assert.ok(rms(planar.data, { to: n }) > 0.08, 'channel 0 has the tone');
    assert.ok(rms(planar.data, { from: n, to: 2 * n }) < 1e-4, 'channel 1 is silent');
    const inter = await decodeAudio(buf, { label: 'x', sampleRate: 44100, channels: 2, layout: 'interleaved' });
    assert.equal(inter.layout, 'interleaved');
    assert.ok(rms(inter.data, { start: 0, stride: 2 }) > 0.08);
    assert.ok(rms(inter.data, { start: 1, stride: 2 }) < 1e-4);
    // downmix to mono keeps energy from the left channel
    const mono = await decodeAudio(buf, { label: 'x', sampleRate: 24000, channels: 1 });
    assert.ok(rms(mono.data) > 0.02);
  });

  test('clip length limits say the measured length', async () => {
    await assert.rejects(
      decodeAudio(file('short.wav'), { label: 'audios[0]', sampleRate: 32000, channels: 2, limits: CLIP_SECONDS.video }),
      isBad(/^audios\[0\]: clip is 1\.62 s long; clips must be 2 to 15 s$/),
    );
    await assert.rejects(probeAudio(file('long.mp3'), 'audios[2]', { limits: CLIP_SECONDS.video }), isBad(/^audios\[2\]: clip is 16\.0\d s long; clips must be 2 to 15 s$/));
    await assert.rejects(probeAudio(file('mono11025.wav'), 'ref_audio', { limits: CLIP_SECONDS.speech }), isBad(/^ref_audio: clip is 2\.50 s long; clips must be 3 to 30 s$/));
    // a clip cut at exactly 15 s decodes slightly longer as AAC; the tolerance accepts it, zero tolerance does not
    const p = await probeAudio(file('fifteen.m4a'), 'audios[0]', { limits: CLIP_SECONDS.video });
    assert.ok(p.durationS > 15 && p.durationS < 15.1, `${p.durationS}`);
    await assert.rejects(probeAudio(file('fifteen.m4a'), 'audios[0]', { limits: { ...CLIP_SECONDS.video, toleranceS: 0 } }), isBad(/clip is 15\.0\d s long/));
    const ok = await decodeAudio(file('stereo44100.mp3'), { label: 'ref_audio', sampleRate: 24000, channels: 1, limits: CLIP_SECONDS.speech });
    assert.ok(Math.abs(ok.durationS - 3) < 0.01);
  });

  test('bad inputs become BadInputError naming the input', async () => {
    const fmt = /not a decodable audio file/;
    await assert.rejects(probeAudio(Buffer.alloc(0), 'audios[0]'), isBad(/^audios\[0\]: the file is empty$/));
    const noise = Buffer.alloc(20000);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 2654435761) >>> 24;
    await assert.rejects(probeAudio(noise, 'audios[1]'), isBad(/^audios\[1\]: /));
    await assert.rejects(decodeAudio(Buffer.from('hello, I am a text file\n'), { label: 'ref_audio', sampleRate: 24000, channels: 1 }), isBad(fmt));
    await assert.rejects(probeAudio(file('mono11025.wav').subarray(0, 20), 'audios[2]'), isBad(/^audios\[2\]: /));
    await assert.rejects(probeAudio(file('silent.mp4'), 'audios[0]'), isBad(/^audios\[0\]: the file has no audio track$/));
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108020000009077', 'hex');
    await assert.rejects(probeAudio(png, 'audios[0]'), isBad(/^audios\[0\]: /));
    // an HLS playlist pointing at a local file must not be followed
    const m3u8 = Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n${join(dir, 'mono11025.wav')}\n#EXT-X-ENDLIST\n`);
    await assert.rejects(probeAudio(m3u8, 'audios[0]'), isBad(fmt));
    // truncated m4a with its index at the end: no moov atom
    const m4a = file('stereo48000.m4a');
    assert.ok(m4a.indexOf('moov') > m4a.indexOf('mdat'));
    await assert.rejects(probeAudio(m4a.subarray(0, m4a.length / 2), 'audios[0]'), isBad(/^audios\[0\]: the mp4\/m4a file is incomplete/));
    // a truncated mp3 still decodes what is there
    const half = await probeAudio(file('stereo44100.mp3').subarray(0, file('stereo44100.mp3').length / 2), 'audios[0]');
    assert.ok(half.durationS > 1.2 && half.durationS < 1.8, `${half.durationS}`);
    await assert.rejects(probeAudio(Buffer.alloc(50 * 1024 * 1024 + 1, 1), 'audios[0]'), isBad(/at most 50 MB/));
  });

  test('a deadline kills a slow decode; an abort gives CancelledError', async () => {
    const buf = file('long.mp3');
    await assert.rejects(decodeAudio(buf, { label: 'audios[0]', sampleRate: 48000, channels: 2, timeoutMs: 1 }), isBad(/^audios\[0\]: decoding took longer than 0\.001 s$/));
    const pre = new AbortController();
    pre.abort('job cancelled');
    await assert.rejects(decodeAudio(buf, { label: 'x', sampleRate: 48000, channels: 2, signal: pre.signal }), (e) => e instanceof CancelledError && e.message === 'job cancelled');
    const mid = new AbortController();
    const p = decodeAudio(buf, { label: 'x', sampleRate: 48000, channels: 2, signal: mid.signal });
    setTimeout(() => mid.abort(), 5);
    await assert.rejects(p, CancelledError);
    writeFileSync(join(dir, 'ok'), ''); // the temp dir is still usable afterwards
  });
});
