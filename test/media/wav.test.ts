import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CancelledError } from '../../src/common/errors';
import { decodeAudio } from '../../src/media/audio-input';
import { encodeWav, floatToPcm16, SPEECH_SAMPLE_RATE, writeWav } from '../../src/media/wav';
import { decodeAudioTrack, listDir, probe, tempDir } from './helpers';

describe('wav out', () => {
  test('speech: 16-bit PCM mono at 24 kHz, header and samples as ffmpeg reads them', async () => {
    const dir = tempDir();
    const path = join(dir, 'tts_1.wav');
    const n = 36000; // 1.5 s
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = 0.6 * Math.sin((2 * Math.PI * 220 * i) / SPEECH_SAMPLE_RATE);
    await writeWav(path, { data, sampleRate: SPEECH_SAMPLE_RATE, channels: 1, layout: 'planar' });
    assert.deepEqual(listDir(dir), ['tts_1.wav']);

    const file = readFileSync(path);
    assert.equal(file.length, 44 + n * 2);
    assert.equal(file.toString('ascii', 0, 4), 'RIFF');
    assert.equal(file.readUInt32LE(4), file.length - 8);
    assert.equal(file.readUInt16LE(20), 1); // PCM
    assert.equal(file.readUInt16LE(22), 1); // mono
    assert.equal(file.readUInt32LE(24), 24000);
    assert.equal(file.readUInt16LE(34), 16);

    const p = probe(path);
    assert.equal(p.audio?.codec, 'pcm_s16le');
    assert.equal(p.audio?.sampleRate, 24000);
    assert.equal(p.audio?.layout, 'mono');
    assert.ok(Math.abs(p.durationS - 1.5) < 0.01);
    const back = decodeAudioTrack(path, 24000, 1);
    assert.equal(back.length, n);
    for (let i = 0; i < n; i += 97) assert.ok(Math.abs(back[i] - data[i]) < 2 / 32767); // ffmpeg divides by 32768

    // and through the module's own decoder
    const d = await decodeAudio(file, { label: 'x', sampleRate: 24000, channels: 1 });
    assert.equal(d.shape[1], n);
    assert.equal(d.durationS, 1.5);
  });

  test('clipping, NaN and stereo interleaving', () => {
    assert.deepEqual([...new Int16Array(new Uint8Array(floatToPcm16(new Float32Array([2, -2, NaN, 0.5, -1]))).buffer)], [32767, -32767, 0, 16384, -32767]);
    // planar [L0 L1 | R0 R1] -> interleaved L0 R0 L1 R1
    const wav = encodeWav({ data: new Float32Array([0.25, 0.5, -0.25, -0.5]), sampleRate: 8000, channels: 2, layout: 'planar' });
    assert.equal(wav.readUInt16LE(22), 2);
    assert.deepEqual([0, 1, 2, 3].map((i) => wav.readInt16LE(44 + 2 * i)), [8192, -8192, 16384, -16383]);
    assert.throws(() => encodeWav({ data: new Float32Array(3), sampleRate: 8000, channels: 2, layout: 'planar' }), /divide/);
  });

  test('an aborted write leaves nothing behind', async () => {
    const dir = tempDir();
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(writeWav(join(dir, 'x.wav'), { data: new Float32Array(10), sampleRate: 24000, channels: 1, layout: 'planar' }, { signal: ac.signal }), CancelledError);
    assert.deepEqual(listDir(dir), []);
  });
});
