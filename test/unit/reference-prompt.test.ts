// The prompt of a reference video job (catalog referencePrompt): a "<Picture n> is a reference image: ..." definition
// line in front of the prompt for each picture it does not name, in input order, as MiniMax's ref-en.txt writes labels
// (`<Picture N>`, angle brackets, one space); a prompt naming all of them is given unchanged.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pictureDefinition, pictureLabel, referencePrompt, unnamedPictures, unnamedVoices, voiceDefinition, soundtrackDefinition } from '../../src/catalog';

const def = (n: number) => `<Picture ${n}> is a reference image: follow its subjects and style; the video does not start on it.`;

test('reference prompt: labels as the guide writes them, one definition line per unnamed picture', () => {
  assert.equal(pictureLabel(3), '<Picture 3>');
  assert.equal(pictureDefinition(2), def(2));
  assert.equal(referencePrompt('a fox in the snow', 1), `${def(1)}\na fox in the snow`);
  assert.equal(referencePrompt('a fox in the snow', 3), `${def(1)}\n${def(2)}\n${def(3)}\na fox in the snow`);
});

test('reference prompt: pictures the prompt names keep the user\'s own wording; only the others are prefixed', () => {
  const named = '<Picture 1> walks past <Picture 2> at dusk';
  assert.equal(referencePrompt(named, 2), named, 'all named: unchanged');
  assert.deepEqual(unnamedPictures('the dog of <Picture 2>', 3), [1, 3]);
  assert.equal(referencePrompt('the dog of <Picture 2>', 3), `${def(1)}\n${def(3)}\nthe dog of <Picture 2>`);
  // a label for a picture that was not sent is left alone (the count comes from the images)
  assert.equal(referencePrompt('<Picture 1> and <Picture 4>', 1), '<Picture 1> and <Picture 4>');
  assert.equal(referencePrompt('no pictures', 0), 'no pictures');
});

test('reference prompt: the match is exact, as the guide spells the label', () => {
  // other spellings are not the label: the definition is added (the user's text stays as it is after it)
  for (const p of ['<picture 1> on a hill', '<Picture1> on a hill', 'Picture 1 on a hill', '< Picture 1 > on a hill']) {
    assert.equal(referencePrompt(p, 1), `${def(1)}\n${p}`, p);
  }
  // <Picture 10> contains no "<Picture 1>": 10 pictures are counted one by one
  assert.deepEqual(unnamedPictures('<Picture 10>', 10), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

test('voices: an "<Audio n> is the voice-timbre reference ..." line for each voice the prompt does not name, after the picture lines', () => {
  const pic = (n: number) => pictureDefinition(n);
  const voice = (n: number) => voiceDefinition(n);
  assert.equal(voice(2), '<Audio 2> is the voice-timbre reference for the speaker (S2); the dialogue follows its voice timbre without copying the original signal.');
  assert.equal(referencePrompt('she says hi', 1, 1), `${pic(1)}\n${voice(1)}\nshe says hi`);
  assert.equal(referencePrompt('she says hi', 2, 3), `${pic(1)}\n${pic(2)}\n${voice(1)}\n${voice(2)}\n${voice(3)}\nshe says hi`);
  assert.equal(referencePrompt('<Picture 1> speaks as <Audio 1>', 1, 2), `${voice(2)}\n<Picture 1> speaks as <Audio 1>`, 'named labels keep their own wording');
  assert.equal(referencePrompt('<Picture 1> speaks as <Audio 1>', 1, 1), '<Picture 1> speaks as <Audio 1>', 'all named: unchanged');
  assert.deepEqual(unnamedVoices('<audio 1> and <Audio  2>', 2), [1, 2], 'exact spelling only');
  assert.equal(referencePrompt('x', 1), referencePrompt('x', 1, 0), 'no voices: the pictures alone');
});

test('a soundtrack beside the pictures: <Audio 1> defined with the fully_copy marker, after the picture lines; unless the prompt names it', () => {
  assert.equal(soundtrackDefinition(1), '<Audio 1> is the soundtrack: fully_copy - <Audio 1> is reused 1:1 as the target video\'s complete final audio track.');
  assert.equal(referencePrompt('a singer on a stage', 2, 0, true), `${pictureDefinition(1)}\n${pictureDefinition(2)}\n${soundtrackDefinition(1)}\na singer on a stage`);
  assert.equal(referencePrompt('<Picture 1> sings <Audio 1>', 1, 0, true), '<Picture 1> sings <Audio 1>', 'named: the user\'s own wording');
  assert.throws(() => referencePrompt('x', 1, 1, true), /a soundtrack is the only audio reference of a job/);
});
