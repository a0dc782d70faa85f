// A tiny byte-level BPE in the Qwen file format (vocab.json, merges.txt, tokenizer_config.json) for the demo
// checkpoints: the 256 byte symbols (ids 0..255, so any text encodes), a few hundred merges learned from a
// built-in corpus, then the special tokens. TextTokenizer.fromDir reads it like a real Qwen checkpoint.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** GPT-2's byte -> printable character map used by byte-level BPE (space -> "Ġ", newline -> "Ċ"). */
export function bytesToUnicode(): string[] {
  const keep = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(keep(b) ? b : 256 + n++));
  return out;
}

/** Special tokens the Qwen3-TTS prompt uses (ids follow the learned vocabulary, in this order). */
export const DEMO_SPECIAL_TOKENS = [
  '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|audio_start|>', '<|audio_end|>',
  '<tts_pad>', '<tts_text_bos>', '<tts_text_eod>', '<tts_text_bos_single>', '<|audio_pad|>',
] as const;

const CORPUS = [
  'The quick brown fox jumps over the lazy dog. This is a demo voice speaking a short sentence.',
  'Hello, how are you today? I am fine, thank you. The weather is nice and the sun is shining.',
  'A video of a cat walking through the garden, then the camera moves slowly to the left.',
  'Der schnelle braune Fuchs springt über den faulen Hund. Привет, как дела? 你好，今天天气很好。',
];
// Approximately the Qwen2 pre-tokenizer split, to learn merges inside the pieces the real one produces.
const PIECES = /'s|'t|'re|'ve|'m|'ll|'d|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

export interface DemoTokenizerOptions {
  /** Merges to learn (default 200; fewer if the corpus runs out of pairs). */
  merges?: number;
  specialTokens?: readonly string[];
}

export interface DemoTokenizerInfo {
  /** Largest id + 1. */
  size: number;
  /** Special token -> id. */
  specialTokens: Record<string, number>;
}

/** The ids writeDemoTokenizer gives (vocabulary size, special tokens), without writing anything. Deterministic. */
export function demoTokenizerInfo(o: DemoTokenizerOptions = {}): DemoTokenizerInfo {
  return buildDemoTokenizer(o).info;
}

/** Writes vocab.json, merges.txt and tokenizer_config.json into `dir` (created if missing). Deterministic. */
export async function writeDemoTokenizer(dir: string, o: DemoTokenizerOptions = {}): Promise<DemoTokenizerInfo> {
  const { vocab, merges, config, info } = buildDemoTokenizer(o);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'vocab.json'), JSON.stringify(vocab));
  await writeFile(join(dir, 'merges.txt'), merges.join('\n') + '\n');
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(config, null, 2));
  return info;
}

/** The three files' contents: byte symbols, merges learned from the corpus, then the special tokens. */
function buildDemoTokenizer(o: DemoTokenizerOptions): { vocab: Record<string, number>; merges: string[]; config: Record<string, unknown>; info: DemoTokenizerInfo } {
  const b2u = bytesToUnicode();
  const vocab: Record<string, number> = {};
  b2u.forEach((ch, i) => (vocab[ch] = i));
  const counts = new Map<string, number>();
  for (const line of CORPUS) for (const m of line.matchAll(PIECES)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
  const words = [...counts].map(([w, n]) => ({ syms: [...Buffer.from(w, 'utf8')].map((b) => b2u[b]!), n }));
  const merges: string[] = [];
  for (let step = 0; step < (o.merges ?? 200); step++) {
    const pairs = new Map<string, number>();
    for (const w of words) for (let i = 0; i + 1 < w.syms.length; i++) {
      const k = `${w.syms[i]} ${w.syms[i + 1]}`;
      pairs.set(k, (pairs.get(k) ?? 0) + w.n);
    }
    let best: string | null = null;
    let bestN = 0;
    for (const [k, n] of [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) if (n > bestN) [best, bestN] = [k, n];
    if (!best) break;
    const [a, b] = best.split(' ') as [string, string];
    merges.push(best);
    if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
    for (const w of words) {
      const s: string[] = [];
      for (let i = 0; i < w.syms.length; i++) {
        if (i + 1 < w.syms.length && w.syms[i] === a && w.syms[i + 1] === b) {
          s.push(a + b);
          i++;
        } else s.push(w.syms[i]!);
      }
      w.syms = s;
    }
  }
  const specialTokens: Record<string, number> = {};
  const decoder: Record<string, object> = {};
  let next = Object.keys(vocab).length;
  for (const t of o.specialTokens ?? DEMO_SPECIAL_TOKENS) {
    specialTokens[t] = next;
    decoder[String(next++)] = { content: t, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  }
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: decoder,
    bos_token: null,
    clean_up_tokenization_spaces: false,
    eos_token: (o.specialTokens ?? DEMO_SPECIAL_TOKENS).includes('<|im_end|>') ? '<|im_end|>' : null,
    errors: 'replace',
    model_max_length: 131072,
    split_special_tokens: false,
    tokenizer_class: 'Qwen2Tokenizer',
    unk_token: null,
  };
  return { vocab, merges, config, info: { size: next, specialTokens } };
}
