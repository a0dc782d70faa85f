import assert from 'node:assert/strict';
import { test } from 'node:test';
import { aspectOf, sizeForTier, snapFrames } from '../../src/catalog';
import { draftImage } from '../../src/image/image.draft';
import { draftVideo } from '../../src/video/video.draft';
import { loadSettings, SettingsError } from '../../src/config/settings';

test('frames snap up to 17k+5 at 24 fps', () => {
  assert.equal(snapFrames(5), 124);
  assert.equal(snapFrames(1), 39);
  assert.equal(snapFrames(15), 362);
  assert.equal(snapFrames(10), 243);
  for (let s = 1; s <= 15; s += 0.25) {
    const f = snapFrames(s);
    assert.equal((f - 5) % 17, 0, `${s}s`);
    assert.ok(f >= s * 24 && f - 17 < s * 24, `${s}s -> ${f} is the smallest grid point covering the clip`);
  }
});

test('tier sizes keep aspect, multiples of 32, about 1 or 4 megapixels', () => {
  assert.deepEqual(sizeForTier(1000, 1000, '1K'), [1024, 1024]);
  assert.deepEqual(sizeForTier(1920, 1080, '1K'), [1376, 768]);
  const [w, h] = sizeForTier(3000, 2000, '2K');
  assert.ok(w % 32 === 0 && h % 32 === 0 && Math.abs((w * h) / (2048 * 2048) - 1) < 0.05);
  assert.equal(aspectOf(1344, 768), '7:4');
  assert.equal(aspectOf(1536, 864), '16:9');
});

test('video drafts: voice clips with images switch image mode to reference; defaults', () => {
  const d = draftVideo({ prompt: 'x' }, 0, 0);
  assert.deepEqual([d.profile.profile, d.aspect, d.res, d.width, d.height, d.seconds, d.frames, d.steps, d.mode], ['fastvid', '16:9', '480p', 864, 480, 5, 124, 8, 't2v']);
  assert.equal(draftVideo({ prompt: 'x' }, 2, 1).image_mode, 'reference');
  assert.equal(draftVideo({ prompt: 'x', audio_mode: 'track' }, 2, 1).image_mode, 'keyframe');
  // track mode: clip 1 is the soundtrack, and a second clip would have no meaning (README "API")
  assert.throws(() => draftVideo({ prompt: 'x', audio_mode: 'track' }, 0, 2), /^BadInputError: audios: audio_mode track takes 1 clip \(the soundtrack\); 2 given$/);
  // voices are Ref2VA audio references, which need a picture (upstream refuses audio-only): without pictures the
  // prompt's quoted dialogue is spoken in the clip's voice (catalog/dialogue.ts), and a prompt quoting none is a 400
  assert.throws(() => draftVideo({ prompt: 'x' }, 0, 1), /^BadInputError: audios: a voice without pictures speaks the prompt's quoted dialogue, and the prompt quotes none/);
  const alone = draftVideo({ prompt: 'A man says "good morning" and waves.' }, 0, 1);
  assert.deepEqual([alone.voice_alone, alone.tts_text, alone.image_mode], [true, 'good morning', 'keyframe']);
  assert.equal(draftVideo({ prompt: 'x', tts_text: 'hi' }, 0, 1).image_mode, 'keyframe');
  assert.equal(draftVideo({ prompt: 'x', profile: 'fastvid_4step_int8' }, 0, 0).steps, 4);
  assert.equal(draftVideo({ prompt: 'x', seed: 5 }, 0, 0).seed, 5);
});

test('image drafts: imgart with images is a style-reference t2i job; cfg default', () => {
  const d = draftImage({ prompt: 'x', profile: 'imgart_turbo' }, 2);
  assert.deepEqual([d.mode, d.steps, d.cfg], ['t2i', 8, 1]);
  assert.equal(draftImage({ prompt: 'x' }, 1).mode, 'edit');
  assert.equal(draftImage({ prompt: 'x', cfg: 4 }, 0).cfg, 4);
});

test('settings: defaults, and a bad value names the variable', () => {
  const s = loadSettings({});
  assert.deepEqual([s.port, s.host, s.allowPrivateUrls, s.maxQueue], [8000, '127.0.0.1', false, 1000]);
  assert.throws(() => loadSettings({ PORT: 'eighty' }), (e: Error) => e instanceof SettingsError && /^PORT="eighty"/.test(e.message));
  assert.throws(() => loadSettings({ ALLOW_PRIVATE_URLS: 'maybe' }), /ALLOW_PRIVATE_URLS/);
  assert.throws(() => loadSettings({ API_TOKEN: 'short' }), /API_TOKEN/);
  assert.throws(() => loadSettings({ LOG_LEVEL: 'loud' }), /LOG_LEVEL/);
});
