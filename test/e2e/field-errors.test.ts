// The page's rule for placing a server error beside a form field (client/src/field-errors.ts), on the reasons
// the service really gives (src/jobs/job-requests.ts, src/media/*, the 422 validation pipe).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fieldOfLoc, fieldOfReason, placeErrors } from '../../client/src/field-errors';

const IMAGE = ['prompt', 'negative_prompt', 'profile', 'aspect', 'res', 'size', 'size_from_ref', 'seed', 'steps', 'cfg', 'images'];
const VIDEO = ['prompt', 'profile', 'aspect', 'res', 'seconds', 'seed', 'steps', 'images', 'image_mode', 'audios', 'audio_mode', 'tts_text', 'tts_ref_text', 'tts_language'];

describe('field-errors: where a 400 reason goes', () => {
  const cases: [string, string[], string | null][] = [
    ['size: width 100 must be a multiple of 32 from 256 to 4096', IMAGE, 'size'],
    ['size_from_ref is for editing; imgart_turbo cannot edit', IMAGE, 'size_from_ref'],
    ['cfg must be 0 (profile default, 1) or from 1 to 20 (got 0.5)', IMAGE, 'cfg'],
    ['steps must be 0 (profile default, 25) or from 1 to 200 (got 300)', IMAGE, 'steps'],
    ['unknown aspect "7:3"; use one of: 1:1, 16:9, 9:16, 4:3, 3:4', IMAGE, 'aspect'],
    ['unknown image profile "nope"; use one of: imgmain, imgmain_bf16', IMAGE, 'profile'],
    ['prompt is empty; say what to make', IMAGE, 'prompt'],
    ['negative_prompt is 10001 characters long; the limit is 10000', IMAGE, 'negative_prompt'],
    ['images[1] (cat.gif): gif images are not accepted; use png, jpeg or webp', IMAGE, 'images'],
    ['seconds must be from 1 to 15 (got 20)', VIDEO, 'seconds'],
    ['too many audios: 4 given, a video takes at most 3', VIDEO, 'audios'],
    ['unknown tts_language "Klingon"; use one of: Auto, Chinese', VIDEO, 'tts_language'],
    ['audios[0] (a.mp3): clip is longer than 15 s; clips must be 2 to 15 s', VIDEO, 'audios'],
    ['the queue is full (1000 jobs waiting); try again when some have finished', VIDEO, null],
  ];
  for (const [reason, fields, want] of cases) {
    it(`${JSON.stringify(reason.slice(0, 40))} -> ${want}`, () => assert.equal(fieldOfReason(reason, fields), want));
  }
});

describe('field-errors: 422 entries', () => {
  it('loc names the field after "body"; an index inside it is ignored', () => {
    assert.equal(fieldOfLoc(['body', 'seed'], IMAGE), 'seed');
    assert.equal(fieldOfLoc(['body', 'images', 2], IMAGE), 'images');
    assert.equal(fieldOfLoc(['body', 0], IMAGE), null);
    assert.equal(fieldOfLoc('seed', IMAGE), null);
  });

  it('places each entry; one naming no form field goes to the form with its loc', () => {
    const placed = placeErrors(422, [
      { loc: ['body', 'steps'], msg: 'Input should be a valid integer', type: 'int_parsing' },
      { loc: ['body', 'wait'], msg: 'Input should be a valid boolean', type: 'bool_parsing' },
    ], IMAGE);
    assert.deepEqual(placed, [
      { field: 'steps', message: 'Input should be a valid integer' },
      { field: null, message: 'body.wait: Input should be a valid boolean' },
    ]);
  });

  it('a 400 naming several problems (a line each) places each at its field', () => {
    assert.deepEqual(placeErrors(400, 'prompt is empty; say what to make\nsize: width 300 must be a multiple of 32 from 256 to 4096', IMAGE), [
      { field: 'prompt', message: 'prompt is empty; say what to make' },
      { field: 'size', message: 'size: width 300 must be a multiple of 32 from 256 to 4096' },
    ]);
  });

  it('other statuses go to the form whatever they name', () => {
    assert.deepEqual(placeErrors(503, 'speech synthesis is not available yet', ['text']), [{ field: null, message: 'speech synthesis is not available yet' }]);
    assert.deepEqual(placeErrors(429, 'the queue is full; prompt later', IMAGE), [{ field: null, message: 'the queue is full; prompt later' }]);
  });
});
