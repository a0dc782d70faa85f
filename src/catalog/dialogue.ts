// A voice without pictures (issue 50): the contract's audio_mode voice clones the clip's timbre and "the model speaks
// the dialogue from the prompt", but MiniMax H3 takes a voice reference only beside a picture (upstream's Ref2VA
// refuses audio alone). Kiln composes it from what runs on every profile: the prompt's quoted dialogue is spoken by
// the speech model in the clip's voice (the tts_text path) and that speech is the soundtrack the picture is
// lip-synced to. Pure: the rule and its 400s, read by drafting.

/** The quote pairs a prompt's dialogue is written in: "...", “...”, „...“, «...», 「...」, 『...』. */
const QUOTES = /"([^"]*)"|“([^”]*)”|„([^“”]*)[“”]|«([^»]*)»|「([^」]*)」|『([^』]*)』/g;

/** The words a prompt quotes, in order, each trimmed and joined by a space ('' when it quotes nothing); the clip
 * tags (<Audio 1>) and picture tags inside quotes are not words. */
export function quotedDialogue(prompt: string): string {
  const said: string[] = [];
  for (const m of prompt.matchAll(QUOTES)) {
    const words = (m.slice(1).find((g) => g !== undefined) ?? '').replace(/<(Audio|Picture) \d+>/g, ' ').replace(/\s+/g, ' ').trim();
    if (words !== '') said.push(words);
  }
  return said.join(' ');
}

/** What a voice without pictures speaks: the prompt's quoted dialogue, or why the request cannot be run that way. */
export function voiceAloneSpeech(prompt: string, audios: number): { text: string } | { problem: string } {
  if (audios > 1) {
    return { problem: `audios: without pictures a voice speaks the prompt's quoted dialogue as the soundtrack, so one clip is taken (${audios} given); for several speakers give their pictures in images (a reference picture each), or use audio_mode track for a soundtrack` };
  }
  const text = quotedDialogue(prompt);
  if (text === '') {
    return { problem: 'audios: a voice without pictures speaks the prompt\'s quoted dialogue, and the prompt quotes none: write what is said in quotes (A man says "good morning"), or set tts_text, or give a picture of who speaks, or use audio_mode track for a soundtrack' };
  }
  return { text };
}
