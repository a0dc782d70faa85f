// Text tokenizer for the Qwen-family models, from a checkpoint's own files: tokenizer.json when it ships one,
// otherwise vocab.json + merges.txt (built into a tokenizer.json in memory, see qwen-bpe.ts), plus
// tokenizer_config.json for added and special tokens. Encoding runs in @huggingface/tokenizers (pure JS).
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { parseMerges, qwen2TokenizerJson, withConfigTokens, type TokenizerConfigJson, type TokenizerJson } from './qwen-bpe';

export class TokenizerError extends Error {
  override readonly name = 'TokenizerError';
}

export interface TokenizerSources {
  /** A parsed tokenizer.json (takes precedence over vocab + merges). */
  tokenizerJson?: TokenizerJson;
  /** vocab.json, parsed. */
  vocab?: Record<string, number>;
  /** merges.txt, as text. */
  merges?: string;
  /** tokenizer_config.json, parsed ({} if the checkpoint has none). */
  config: TokenizerConfigJson;
}

export class TextTokenizer {
  private readonly ids: Map<string, number>;
  private readonly special: Set<number>;

  private constructor(
    private readonly tok: Tokenizer,
    /** The tokenizer.json in use (built from vocab + merges when the checkpoint has none). */
    readonly json: TokenizerJson,
  ) {
    this.ids = new Map(Object.entries(json.model.vocab));
    for (const t of json.added_tokens ?? []) this.ids.set(t.content, t.id);
    this.special = new Set((json.added_tokens ?? []).filter((t) => t.special).map((t) => t.id));
  }

  static fromSources(s: TokenizerSources): TextTokenizer {
    let json: TokenizerJson;
    if (s.tokenizerJson) json = withConfigTokens(s.tokenizerJson, s.config);
    else if (s.vocab && s.merges !== undefined) json = qwen2TokenizerJson(s.vocab, parseMerges(s.merges), s.config);
    else throw new TokenizerError('tokenizer: need tokenizer.json, or vocab.json and merges.txt');
    return new TextTokenizer(new Tokenizer(json, s.config), json);
  }

  /** Reads a checkpoint folder: tokenizer.json or vocab.json + merges.txt, and tokenizer_config.json if present. */
  static async fromDir(dir: string): Promise<TextTokenizer> {
    const read = async (name: string): Promise<string | undefined> => (existsSync(join(dir, name)) ? readFile(join(dir, name), 'utf8') : undefined);
    const parse = <T>(name: string, text: string | undefined): T | undefined => {
      if (text === undefined) return undefined;
      try {
        return JSON.parse(text) as T;
      } catch (e) {
        throw new TokenizerError(`${join(dir, name)}: not JSON (${(e as Error).message})`);
      }
    };
    const config = parse<TokenizerConfigJson>('tokenizer_config.json', await read('tokenizer_config.json')) ?? {};
    const tokenizerJson = parse<TokenizerJson>('tokenizer.json', await read('tokenizer.json'));
    if (tokenizerJson) return TextTokenizer.fromSources({ tokenizerJson, config });
    const vocab = parse<Record<string, number>>('vocab.json', await read('vocab.json'));
    const merges = await read('merges.txt');
    if (!vocab || merges === undefined) throw new TokenizerError(`${dir}: no tokenizer.json, and no vocab.json + merges.txt`);
    return TextTokenizer.fromSources({ vocab, merges, config });
  }

  /** Token ids of `text` (no BOS/EOS: Qwen tokenizers add none); special tokens written in the text are matched. */
  encode(text: string): number[] {
    return this.tok.encode(text, { add_special_tokens: true }).ids;
  }

  decode(ids: readonly number[], o: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return ''; // the library refuses an empty list
    return this.tok.decode([...ids], { skip_special_tokens: o.skipSpecialTokens ?? false, clean_up_tokenization_spaces: false });
  }

  /** The id of a token (e.g. "<|im_start|>"); throws if the vocabulary lacks it. */
  tokenId(token: string): number {
    const id = this.ids.get(token);
    if (id === undefined) throw new TokenizerError(`tokenizer: no token ${JSON.stringify(token)}`);
    return id;
  }

  hasToken(token: string): boolean {
    return this.ids.has(token);
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }

  /** Largest id + 1 (transformers' len(tokenizer)). */
  get size(): number {
    let max = -1;
    for (const id of this.ids.values()) max = Math.max(max, id);
    return max + 1;
  }
}
