// The Qwen byte-level BPE as a tokenizer.json object, built from a checkpoint's vocab.json + merges.txt (Qwen3-TTS
// ships no tokenizer.json). The settings are those transformers (5.12, Qwen2Tokenizer) writes for these files:
// NFC normalizer; Split on the Qwen2 regex (isolated) then ByteLevel without its own regex; BPE without unk or
// dropout; ByteLevel decoder. Added tokens: tokenizer_config.json's added_tokens_decoder, then (as transformers
// does) every special token the config names that is still unknown, appended at the next free id (MiniMax H3
// names <d>, </d>, <|cutoff|>, ... only in additional_special_tokens).

/** The Qwen2 pre-tokenizer pattern (contractions, letter runs, single digits, punctuation runs, newlines, spaces). */
export const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

export interface AddedTokenJson {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/** The parts of tokenizer_config.json that decide the vocabulary. */
export interface TokenizerConfigJson {
  added_tokens_decoder?: Record<string, Partial<AddedTokenJson> & { content: string }>;
  additional_special_tokens?: string[];
  extra_special_tokens?: Record<string, string> | string[];
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  pad_token?: string | { content: string } | null;
  unk_token?: string | { content: string } | null;
  [key: string]: unknown;
}

export interface TokenizerJson {
  added_tokens?: AddedTokenJson[];
  model: { type: string; vocab: Record<string, number>; [key: string]: unknown };
  [key: string]: unknown;
}

/** merges.txt text -> [left, right] pairs (skips the "#version" header and blank lines). */
export function parseMerges(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const line of text.split('\n')) {
    const l = line.replace(/\r$/, '');
    if (!l || l.startsWith('#version')) continue;
    const sp = l.indexOf(' ');
    if (sp <= 0 || sp === l.length - 1 || l.indexOf(' ', sp + 1) >= 0) throw new Error(`merges.txt: bad line ${JSON.stringify(l)}`);
    out.push([l.slice(0, sp), l.slice(sp + 1)]);
  }
  return out;
}

/** tokenizer.json for the Qwen BPE from the checkpoint's vocab, merges and tokenizer_config. */
export function qwen2TokenizerJson(vocab: Record<string, number>, merges: [string, string][], config: TokenizerConfigJson): TokenizerJson {
  const json: TokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [],
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: QWEN2_SPLIT_REGEX }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: {},
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
  return withConfigTokens(json, config);
}

/** Adds tokenizer_config.json's added and special tokens that `json` lacks (a copy; `json` is not changed). */
export function withConfigTokens(json: TokenizerJson, config: TokenizerConfigJson): TokenizerJson {
  const added = [...(json.added_tokens ?? [])];
  const byContent = new Map(added.map((t) => [t.content, t]));
  const vocab = json.model.vocab;
  for (const [id, t] of Object.entries(config.added_tokens_decoder ?? {})) {
    if (byContent.has(t.content)) continue;
    const tok: AddedTokenJson = {
      id: Number(id),
      content: t.content,
      single_word: t.single_word ?? false,
      lstrip: t.lstrip ?? false,
      rstrip: t.rstrip ?? false,
      normalized: t.normalized ?? false,
      special: t.special ?? false,
    };
    added.push(tok);
    byContent.set(tok.content, tok);
  }
  let next = 0; // the next free id (a loop: 150k values overflow Math.max's argument list)
  for (const id of Object.values(vocab)) next = Math.max(next, id + 1);
  for (const t of added) next = Math.max(next, t.id + 1);
  const name = (t: TokenizerConfigJson['bos_token']) => (typeof t === 'string' ? t : t?.content);
  const extra = config.extra_special_tokens;
  const specials = [
    ...(config.additional_special_tokens ?? []),
    ...(Array.isArray(extra) ? extra : Object.values(extra ?? {})),
    name(config.bos_token),
    name(config.eos_token),
    name(config.unk_token),
    name(config.pad_token),
  ];
  for (const s of specials) {
    if (!s || byContent.has(s) || s in vocab) continue;
    const tok: AddedTokenJson = { id: next++, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
    added.push(tok);
    byContent.set(s, tok);
  }
  added.sort((a, b) => a.id - b.id);
  return { ...json, added_tokens: added };
}
