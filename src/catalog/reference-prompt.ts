// The prompt of a reference video job (image_mode reference). The contract: the images are named <Picture 1>,
// <Picture 2>, ... in the prompt, and "if the prompt does not contain them they are prefixed automatically".
// MiniMax's full-reference prompt guide (shared/upstream/minimax-h3/prompt-guides/ref-en.txt §2) writes a label as
// `<Picture N>` (angle brackets, one space, the 1-based input index) and defines each one on its own line before the
// description (`subject_definitions`: "<Subject 1> is the young woman in <Picture 1>, ..."). So for every image whose
// label the prompt does not contain, one definition line is put in front of the prompt, in input order:
//
//   <Picture 2> is a reference image: follow its subjects and style; the video does not start on it.
//   <the prompt as sent>
//
// Labels the user wrote stay where they are (their own definitions); the match is exact (`<Picture 2>`, case and the
// single space included), as the guide spells it. The text encoder sees the pictures themselves ahead of all of this
// ("<Picture i>: " + vision block, presentation.ts ref2vaPresentation); the prefix only gives the prompt the names.
//
// Voices (audio_mode voice, with the pictures: the contract's "<Audio 1> and so on in the prompt, added automatically
// if absent") follow the same rule after the picture lines, worded as ref-en.txt defines a voice clone (§2.4 "<Audio 1>
// is the voice-timbre reference for <Subject 1> (S1).", §4.2's `reference` marker "... without copying the original
// signal"); the service cannot know which subject speaks, so voice n is the n-th speaker (Sn):
//
//   <Audio 1> is the voice-timbre reference for the speaker (S1); the dialogue follows its voice timbre without copying the original signal.
//
// A soundtrack with the pictures (audio_mode track's clip, or tts_text's speech) is <Audio 1> too, the one audio
// reference of the job, defined with ref-en.txt §4.2's `fully_copy` marker, upstream's only documented form of a given
// soundtrack (h3-conditioning.md 4):
//
//   <Audio 1> is the soundtrack: fully_copy - <Audio 1> is reused 1:1 as the target video's complete final audio track.

/** The label of image `n` (1-based), as ref-en.txt writes it. */
export function pictureLabel(n: number): string {
  return `<Picture ${n}>`;
}

/** The definition line put in front of a prompt that does not name image `n`. */
export function pictureDefinition(n: number): string {
  return `${pictureLabel(n)} is a reference image: follow its subjects and style; the video does not start on it.`;
}

/** The images (1-based) whose label the prompt does not contain. */
export function unnamedPictures(prompt: string, images: number): number[] {
  const out: number[] = [];
  for (let n = 1; n <= images; n++) if (!prompt.includes(pictureLabel(n))) out.push(n);
  return out;
}

/** The label of voice `n` (1-based), as ref-en.txt writes it. */
export function audioLabel(n: number): string {
  return `<Audio ${n}>`;
}

/** The definition line put in front of a prompt that does not name voice `n`. */
export function voiceDefinition(n: number): string {
  return `${audioLabel(n)} is the voice-timbre reference for the speaker (S${n}); the dialogue follows its voice timbre without copying the original signal.`;
}

/** The definition line put in front of a prompt that does not name the soundtrack, audio `n`. */
export function soundtrackDefinition(n: number): string {
  return `${audioLabel(n)} is the soundtrack: fully_copy - ${audioLabel(n)} is reused 1:1 as the target video's complete final audio track.`;
}

/** The voices (1-based) whose label the prompt does not contain. */
export function unnamedVoices(prompt: string, voices: number): number[] {
  const out: number[] = [];
  for (let n = 1; n <= voices; n++) if (!prompt.includes(audioLabel(n))) out.push(n);
  return out;
}

/** The text the model is given for a reference job with `images` pictures and `voices` voices, or a `soundtrack`
 * (then voices is 0 and the soundtrack is <Audio 1>): the prompt, with a definition line in front for each picture,
 * then each voice or the soundtrack, it does not name (none when it names them all, so the prompt is then unchanged). */
export function referencePrompt(prompt: string, images: number, voices = 0, soundtrack = false): string {
  if (soundtrack && voices) throw new RangeError('referencePrompt: a soundtrack is the only audio reference of a job');
  const audio = soundtrack ? unnamedVoices(prompt, 1).map(soundtrackDefinition) : unnamedVoices(prompt, voices).map(voiceDefinition);
  const lines = [...unnamedPictures(prompt, images).map(pictureDefinition), ...audio];
  return lines.length ? `${lines.join('\n')}\n${prompt}` : prompt;
}
