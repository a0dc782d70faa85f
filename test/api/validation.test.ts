import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { auth, startApp, startAppOnDemoWeights, TestApp } from './harness';
import { dataUri, pngBytes, wavBytes } from './inputs';
import { testPipeline } from './test-pipelines';

describe('validation: 422 for wrong types, 400 for values a user can fix', () => {
  let t: TestApp;
  before(async () => (t = await startApp({ pipelines: [testPipeline('video', 'fastvid', { stepMs: 1 }), testPipeline('image', 'imgmain', { stepMs: 1 })] })));
  after(() => t.close(true));

  const post = (path: string, body: unknown) => t.http.post(path).set(auth).send(body as object);

  test('422: one entry per offending field with loc, msg, type and input', async () => {
    const res = await post('/api/v1/generate', { prompt: 'x', seconds: 'five', seed: 1.5, steps: '3', wait: 'yes', images: ['https://a.example/1.png', 7], callback_url: 5 });
    assert.equal(res.status, 422);
    const byLoc = Object.fromEntries(res.body.detail.map((e: any) => [e.loc.join('.'), e]));
    assert.deepEqual(Object.keys(byLoc).sort(), ['body.callback_url', 'body.images.1', 'body.seconds', 'body.seed', 'body.steps', 'body.wait']);
    assert.deepEqual(byLoc['body.seconds'], { loc: ['body', 'seconds'], msg: 'Input should be a valid number, unable to parse string as a number', type: 'float_parsing', input: 'five' });
    assert.equal(byLoc['body.seed'].type, 'int_from_float');
    assert.equal(byLoc['body.steps'].type, 'int_parsing', 'JSON is strict: a numeric string is not an integer');
    assert.equal(byLoc['body.wait'].type, 'bool_parsing');
    assert.deepEqual(byLoc['body.images.1'], { loc: ['body', 'images', 1], msg: 'Input should be a valid string', type: 'string_type', input: 7 });
    for (const e of res.body.detail) assert.equal(typeof e.msg, 'string');
  });

  test('422: missing prompt, null for a non-nullable field, non-object body, malformed JSON', async () => {
    let res = await post('/api/v1/image', { cfg: null });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.detail.map((e: any) => [e.loc.join('.'), e.type]).sort(), [['body.cfg', 'float_type'], ['body.prompt', 'missing']]);
    res = await post('/api/v1/tts', [1, 2]);
    assert.equal(res.status, 422);
    assert.equal(res.body.detail[0].type, 'model_attributes_type');
    res = await t.http.post('/api/v1/generate').set(auth).set('content-type', 'application/json').send('{"prompt": ');
    assert.equal(res.status, 422);
    assert.equal(res.body.detail[0].type, 'json_invalid');
    res = await post('/api/v1/generate', { prompt: 'x', callback_url: null, images: 'https://a.example/x.png' });
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.detail.map((e: any) => e.loc.join('.')), ['body.images']);
  });

  test('422 on multipart: strings are parsed with the same rules', async () => {
    const res = await t.http.post('/api/jobs').set(auth).field('prompt', 'a cat').field('seconds', 'abc').field('seed', '2.5');
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.detail.map((e: any) => [e.loc.join('.'), e.type]).sort(), [['body.seconds', 'float_parsing'], ['body.seed', 'int_from_float']]);
    const ok = await t.http.post('/api/images').set(auth).field('prompt', 'a cat').field('seed', '42').field('steps', '3').field('size_from_ref', 'false').field('cfg', '0');
    assert.equal(ok.status, 200);
    assert.equal(ok.body.seed, 42);
    assert.equal(ok.body.steps, 3);
    assert.equal(ok.body.size_from_ref, false);
  });

  test('400 reasons on the video endpoint', async () => {
    const cases: [object, RegExp][] = [
      [{ prompt: '' }, /prompt is empty/],
      [{ prompt: '   ' }, /prompt is empty/],
      [{ prompt: 'x', profile: 'nope' }, /unknown video profile "nope"; use one of: fastvid, /],
      [{ prompt: 'x', aspect: '4:3' }, /unknown aspect "4:3"; use one of: 16:9, 9:16, 1:1/],
      [{ prompt: 'x', res: '1080p' }, /unknown res "1080p"/],
      [{ prompt: 'x', seconds: 0.5 }, /seconds must be from 1 to 15 \(got 0.5\)/],
      [{ prompt: 'x', seconds: 16 }, /seconds must be from 1 to 15/],
      [{ prompt: 'x', images: Array(7).fill('https://a.example/x.png') }, /too many images: 7 given, a video takes at most 6/],
      [{ prompt: 'x', audios: Array(4).fill('https://a.example/x.wav') }, /too many audios: 4 given/],
      [{ prompt: 'x', tts_language: 'Klingon' }, /unknown tts_language "Klingon"/],
      [{ prompt: 'x', timeout: 1801 }, /timeout must be a whole number of seconds from 0 to 1800/],
      [{ prompt: 'x', seed: -2 }, /seed must be -1 \(random\) or a whole number/],
      [{ prompt: 'x', steps: -1 }, /steps must be 0 \(profile default, 8\)/],
      [{ prompt: 'x', image_mode: 'first' }, /unknown image_mode/],
      [{ prompt: 'x', tts_text: 'hello' }, /tts_text needs a voice/],
      [{ prompt: 'x', audio_mode: 'track' }, /audio_mode track needs a soundtrack clip/],
      [{ prompt: 'x', callback_url: 'ftp://a.example/cb' }, /callback_url: must be an https or http URL/],
      [{ prompt: 'x', callback_url: 'not a url' }, /callback_url: not a valid URL/],
      [{ prompt: 'x'.repeat(10_001) }, /prompt is 10001 characters long; the limit is 10000/],
      // a blank prompt does not hide another problem: both reasons, a line each
      [{ prompt: '   ', seconds: 16 }, /^prompt is empty; say what to make\nseconds must be from 1 to 15 \(got 16\)$/],
    ];
    for (const [body, reason] of cases) {
      const res = await post('/api/v1/generate', body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.match(res.body.detail, reason);
    }
  });

  test('400 reasons on the image endpoint', async () => {
    const img = dataUri('image/png', await pngBytes());
    const cases: [object, RegExp][] = [
      [{ prompt: 'x', profile: 'sdxl' }, /unknown image profile "sdxl"/],
      [{ prompt: 'x', aspect: '21:9' }, /unknown aspect "21:9"/],
      [{ prompt: 'x', res: '4K' }, /unknown res "4K"/],
      [{ prompt: 'x', size: '1000x1000' }, /size: width 1000 must be a multiple of 32 from 256 to 4096/],
      [{ prompt: 'x', size: '1024x4128' }, /height 4128 must be a multiple of 32/],
      [{ prompt: 'x', size: '1024*1024' }, /size must be <width>x<height>/],
      [{ prompt: '   ', size: '300x300' }, /^prompt is empty; say what to make\nsize: width 300 must be a multiple of 32 from 256 to 4096$/],
      [{ prompt: 'x', size: '1024x1024', size_from_ref: true, images: [img] }, /either size or size_from_ref/],
      [{ prompt: 'x', size_from_ref: true }, /size_from_ref needs at least one image/],
      [{ prompt: 'x', profile: 'imgart_turbo', images: [img, img, img, img] }, /too many images: 4 given, imgart_turbo takes at most 3 style references/],
      [{ prompt: 'x', images: Array(11).fill(img) }, /too many images: 11 given, imgmain takes at most 10/],
      [{ prompt: 'x', profile: 'imgart_turbo', size_from_ref: true, images: [img] }, /imgart_turbo cannot edit .*: imgmain and imgmain_bf16 edit/],
      [{ prompt: 'x', cfg: 0.5 }, /cfg must be 0 \(profile default, 1\) or from 1 to 20/],
      [{ prompt: 'x', timeout: 5000 }, /timeout must be/],
    ];
    for (const [body, reason] of cases) {
      const res = await post('/api/v1/image', body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.match(res.body.detail, reason);
    }
  });

  test('400 for inputs that are not what they claim: bad images, bad audio, oversized files, wrong clip lengths', async () => {
    const notImage = dataUri('image/png', Buffer.from('this is not a png at all'));
    let res = await post('/api/v1/image', { prompt: 'x', images: [dataUri('image/png', await pngBytes()), notImage] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /^images\[1\]: /);
    res = await post('/api/v1/image', { prompt: 'x', images: ['data:text/plain;base64,aGVsbG8='] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\]: data URI must look like data:image/);
    const big = Buffer.alloc(25 * 1024 * 1024 + 10, 1);
    res = await post('/api/v1/image', { prompt: 'x', images: [dataUri('image/png', big)] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\]: file is larger than 25 MB/);
    res = await t.http.post('/api/images').set(auth).field('prompt', 'x').attach('images', big, 'big.png');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /images\[0\] \(big.png\): file is 25.0 MB; images may be at most 25 MB/);
    // clips in voice mode (the default) come with a picture (voices need one: video-voices.test.ts)
    const png = await pngBytes();
    res = await post('/api/v1/generate', { prompt: 'x', images: [dataUri('image/png', png)], audios: [dataUri('audio/wav', wavBytes(1))] });
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /audios\[0\]: clip is 1.00 s long; clips must be 2 to 15 s/);
    res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').attach('images', png, 'p.png').attach('audios', wavBytes(3), 'a.wav').attach('audios', wavBytes(16), 'b.wav');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /audios\[1\] \(b.wav\): clip is 16.00 s long; clips must be 2 to 15 s/);
    res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').attach('images', png, 'p.png').attach('audios', Buffer.from('garbage audio bytes'), 'c.mp3');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /audios\[0\] \(c.mp3\)/);
    res = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').attach('videos', await pngBytes(), 'x.png');
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /unexpected file field "videos": this form takes files only in the fields the API names/);
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, 1, 'only the one valid multipart job above was stored');
  });

  test('accepted inputs: a data-URI image and a clip make an i2v job with image_count', async () => {
    const res = await post('/api/v1/generate', { prompt: 'x', images: [dataUri('image/png', await pngBytes())], audios: [dataUri('audio/wav', wavBytes(2.5))] });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.mode, 'i2v');
    assert.equal(res.body.image_count, 1);
  });
});

describe("what the built-in models cannot run is refused at creation (their entries' Accepts)", () => {
  let t: TestApp;
  before(async () => (t = await startAppOnDemoWeights()));
  after(() => t.close(true));
  const post = (path: string, body: object) => t.http.post(path).set(auth).send(body);

  test('steps below the model\'s minimum, inputs a mode cannot take: 400s that say so, no job stored', async () => {
    const cases: [string, object, RegExp][] = [
      ['/api/v1/image', { prompt: 'x', size: '256x256', steps: 1 }, /^steps: profile imgmain runs 2 to 200 steps \(got 1\)$/],
      // keyframes, tracks, tts_text, references and voices run on every profile (test/api/video-keyframes.test.ts,
      // video-track, video-tts, video-references, video-voices); a voice without pictures needs quoted dialogue
      ['/api/v1/generate', { prompt: 'x', profile: 'basevid50', audios: [dataUri('audio/wav', wavBytes(3)), dataUri('audio/wav', wavBytes(3))], tts_text: 'hello' }, /^audios: with tts_text, audios\[0\] is the voice .*; more clips would be voices \(audio_mode voice\), which a job with a soundtrack does not take: 2 given$/],
      ['/api/v1/generate', { prompt: 'x', profile: 'basevid50', audios: [dataUri('audio/wav', wavBytes(3))], audio_mode: 'voice' }, /^audios: a voice without pictures speaks the prompt's quoted dialogue, and the prompt quotes none: /],
      ['/api/v1/generate', { prompt: 'x', audios: [dataUri('audio/wav', wavBytes(3)), dataUri('audio/wav', wavBytes(3))], audio_mode: 'track' }, /^audios: audio_mode track takes 1 clip \(the soundtrack\); 2 given$/],
    ];
    for (const [path, body, reason] of cases) {
      const res = await post(path, body);
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.detail, reason);
    }
    const multipart = await t.http.post('/api/jobs').set(auth).field('prompt', 'x').field('audio_mode', 'track')
      .attach('audios', wavBytes(3), 'a.wav').attach('audios', wavBytes(3), 'b.wav');
    assert.equal(multipart.status, 400);
    assert.match(multipart.body.detail, /^audios: audio_mode track takes 1 clip \(the soundtrack\); 2 given$/);
    assert.equal((await t.http.get('/api/jobs').set(auth)).body.length, 0);
  });
});
