// What a voice without pictures speaks (issue 50): the prompt's quoted dialogue, in order, in the quote styles
// prompts use; the 400s for a prompt that quotes nothing and for several clips.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { quotedDialogue, voiceAloneSpeech } from '../../src/catalog';

describe('quotedDialogue', () => {
  test('each quote style, in order, trimmed, joined by a space', () => {
    assert.equal(quotedDialogue('A man says "good morning" and then " how are you? "'), 'good morning how are you?');
    assert.equal(quotedDialogue('她说“你好”，然后「再见」'), '你好 再见');
    assert.equal(quotedDialogue('Er sagt „Guten Tag“ und «au revoir» und 『さようなら』'), 'Guten Tag au revoir さようなら');
  });
  test('clip and picture tags inside quotes are not words; empty quotes and no quotes give nothing', () => {
    assert.equal(quotedDialogue('<Audio 1> says "<Audio 1> hello there"'), 'hello there');
    assert.equal(quotedDialogue('he says "" and ""'), '');
    assert.equal(quotedDialogue('a man at the window, the wind blowing'), '');
  });
  test('a quote left open is not dialogue (quotes pair left to right)', () => {
    assert.equal(quotedDialogue('"hello" and a 12" record'), 'hello');
  });
});

describe('voiceAloneSpeech', () => {
  test('one clip and quoted words: the text; none quoted or two clips: a problem saying what to change', () => {
    assert.deepEqual(voiceAloneSpeech('He says "hi"', 1), { text: 'hi' });
    const none = voiceAloneSpeech('a man talks', 1);
    assert.ok('problem' in none && /quotes none: write what is said in quotes/.test(none.problem), JSON.stringify(none));
    const two = voiceAloneSpeech('He says "hi"', 2);
    assert.ok('problem' in two && /one clip is taken \(2 given\)/.test(two.problem), JSON.stringify(two));
  });
});
