// Long texts for Qwen3-TTS: split at sentence boundaries into chunks the model speaks one at a time (each chunk is
// its own generate() with the same voice; the waveforms are joined). Upstream has no splitting: it feeds the whole
// text, which works for a paragraph but drifts (and costs quadratic attention) on pages of text.
//
// Boundaries, for the ten languages the service offers:
//   - sentence ends: . ! ? … (Latin and Cyrillic scripts, Korean) followed by whitespace or the end, closing quotes
//     and brackets staying with their sentence ("Yes." / « Oui ! » / „Ja.“); ideographic 。！？．｡ and ‼ ⁇ ⁈ ⁉
//     (Chinese, Japanese) end a sentence with no space after them (closers 」』）】》〉"” stay attached);
//   - newlines (paragraphs) always end a sentence;
//   - a sentence longer than a chunk is cut at clause marks (, ; : — and ，、；：), then at spaces, then anywhere.
// Spanish ¿ ¡ open a sentence and need nothing; French puts a space before ! ? ; : which the rules allow.
// Chunk size is counted in "units": 1 per character, 3 per CJK ideograph, kana or hangul syllable (about as long to
// speak as three Latin letters), so the same limit gives similar durations in every language.

/** Default chunk limit in units (~20 s of speech). */
export const DEFAULT_CHUNK_UNITS = 300;

const CLOSERS = `"'”’“‘»›)]}」』）】》〉〕＂＇`; // “ ‘ close German quotes („Ja.“)
const LATIN_END = /[.!?…]/u;
const WIDE_END = /[。！？．｡‼⁇⁈⁉]/u;
const CLAUSE = /[,;:—–，、；：]/u;

/** Units a string costs (see the header): wide scripts count 3 per character. */
export function textUnits(s: string): number {
  let n = 0;
  for (const ch of s) n += isWide(ch) ? 3 : 1;
  return n;
}

function isWide(ch: string): boolean {
  const c = ch.codePointAt(0)!;
  return (
    (c >= 0x3040 && c <= 0x30ff) || // hiragana, katakana
    (c >= 0x3400 && c <= 0x4dbf) || // CJK extension A
    (c >= 0x4e00 && c <= 0x9fff) || // CJK unified ideographs
    (c >= 0xac00 && c <= 0xd7af) || // hangul syllables
    (c >= 0xf900 && c <= 0xfaff) || // CJK compatibility ideographs
    (c >= 0x20000 && c <= 0x2ffff) // CJK extensions B..
  );
}

/** Sentences of `text`, in order, each with its trailing punctuation and closers, trimmed; empty ones dropped. */
export function splitSentences(text: string): string[] {
  const chars = [...text.replace(/\r\n?/g, '\n')];
  const out: string[] = [];
  let cur = '';
  const flush = () => {
    const s = cur.trim();
    if (s) out.push(s);
    cur = '';
  };
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i]!;
    if (ch === '\n') {
      flush();
      continue;
    }
    cur += ch;
    const wide = WIDE_END.test(ch);
    if (!wide && !LATIN_END.test(ch)) continue;
    // Runs of terminators ("?!", "...", "。。") and closing quotes/brackets stay with the sentence.
    let j = i + 1;
    while (j < chars.length && (WIDE_END.test(chars[j]!) || LATIN_END.test(chars[j]!) || CLOSERS.includes(chars[j]!))) {
      cur += chars[j];
      j++;
    }
    // French sets the closing guillemet off with a space: « Bonjour ! » stays one sentence.
    let k = j;
    while (k < chars.length && /[ \u00a0\u202f]/u.test(chars[k]!)) k++;
    if (k > j && (chars[k] === '»' || chars[k] === '›')) {
      cur += chars.slice(j, k + 1).join('');
      j = k + 1;
    }
    i = j - 1;
    const next = chars[j];
    // Latin-script ends need a space (or the end) after them: "3.14", "e.g.x" and "U.S.A" stay whole.
    if (wide || next === undefined || /\s/u.test(next)) flush();
  }
  flush();
  return out;
}

/** Cuts one over-long sentence into pieces of at most `max` units: at clause marks, then spaces, then anywhere. */
function cutLong(sentence: string, max: number): string[] {
  if (textUnits(sentence) <= max) return [sentence];
  const pieces = splitAfter(sentence, (ch, next) => CLAUSE.test(ch) && (next === undefined || /\s/u.test(next) || isWideOrWidePunct(ch)));
  const out: string[] = [];
  for (const p of pieces) {
    if (textUnits(p) <= max) out.push(p);
    else for (const w of splitAfter(p, (ch) => /\s/u.test(ch))) out.push(...hardCut(w, max));
  }
  return pack(out, max);
}

function isWideOrWidePunct(ch: string): boolean {
  return '，、；：'.includes(ch);
}

/** Splits after every character where `at(ch, next)` holds; pieces trimmed, empty ones dropped. */
function splitAfter(s: string, at: (ch: string, next: string | undefined) => boolean): string[] {
  const chars = [...s];
  const out: string[] = [];
  let cur = '';
  chars.forEach((ch, i) => {
    cur += ch;
    if (at(ch, chars[i + 1])) {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
    }
  });
  if (cur.trim()) out.push(cur.trim());
  return out;
}

function hardCut(s: string, max: number): string[] {
  const out: string[] = [];
  let cur = '';
  for (const ch of s) {
    if (cur && textUnits(cur + ch) > max) {
      out.push(cur);
      cur = '';
    }
    cur += ch;
  }
  if (cur) out.push(cur);
  return out;
}

/** Greedy packing of pieces (in order) into chunks of at most `max` units, joined by a space unless either side is
 * a wide script (Chinese and Japanese are written without spaces). */
function pack(pieces: string[], max: number): string[] {
  const out: string[] = [];
  let cur = '';
  for (const p of pieces) {
    if (!cur) {
      cur = p;
      continue;
    }
    const joined = joinPieces(cur, p);
    if (textUnits(joined) <= max) cur = joined;
    else {
      out.push(cur);
      cur = p;
    }
  }
  if (cur) out.push(cur);
  return out;
}

function joinPieces(a: string, b: string): string {
  const last = [...a].pop()!;
  const first = [...b][0]!;
  const tight = isWide(last) || WIDE_END.test(last) || '，、；：」』）】》〉'.includes(last) || isWide(first);
  return tight ? a + b : `${a} ${b}`;
}

/**
 * The chunks to speak, in order: whole sentences packed up to `maxUnits` (default DEFAULT_CHUNK_UNITS), a longer
 * sentence cut at clauses, spaces, or (last resort) anywhere. A text that fits is one chunk, trimmed, its inner
 * newlines turned into sentence breaks. Returns [] for a text with nothing but whitespace.
 */
export function splitForSpeech(text: string, maxUnits = DEFAULT_CHUNK_UNITS): string[] {
  if (!(maxUnits >= 1)) throw new RangeError(`splitForSpeech: maxUnits ${maxUnits} must be >= 1`);
  const sentences = splitSentences(text).flatMap((s) => cutLong(s, maxUnits));
  return pack(sentences, maxUnits);
}
