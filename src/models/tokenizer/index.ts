// Qwen byte-level BPE tokenizers from a checkpoint's own files, and the demo checkpoints' tiny one.
export { TextTokenizer, TokenizerError, type TokenizerSources } from './tokenizer';
export { parseMerges, qwen2TokenizerJson, withConfigTokens, QWEN2_SPLIT_REGEX, type TokenizerConfigJson, type TokenizerJson } from './qwen-bpe';
export { demoTokenizerInfo, writeDemoTokenizer, bytesToUnicode, DEMO_SPECIAL_TOKENS, type DemoTokenizerInfo, type DemoTokenizerOptions } from './demo';
