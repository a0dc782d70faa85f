// Qwen3-TTS generation (upstream Qwen3TTSForConditionalGeneration.generate -> talker.generate): the prompt's
// embeddings, then frame by frame
//   talker step -> codebook-0 token c0 (sampling.ts) -> stop on codec eos or max_new_tokens
//   code predictor on [past_hidden, codec_embedding(c0)] -> codebooks 1..15
//   next talker input = codec_embedding(c0) + sum_i code_predictor.codec_embedding[i-1](c_i)
//                       + trailing text row (one per frame) or tts_pad once the text is used up.
// As upstream, max_new_tokens = N talker tokens gives at most N - 1 frames: the last token's other codebooks would
// come from the forward that generation stops before. Cancel: the AbortSignal is checked between frames.
// Readbacks: the picks stay on the GPU (int32 ids in the TalkerSampler's table, embedded from there), so a frame
// is read back once, all 16 codes together, after its code predictor: c0 is not known on the host before that,
// so the predictor also runs on the codec-eos token that ends generation, and that frame is dropped (its draws
// have their own RNG keys, so nothing else changes). The last token allowed by max_new_tokens is read alone.
// After the prompt's prefill and one warm-up frame, a frame allocates no new GPU buffer (pool reuse; the KV
// caches, masks and token buffers are allocated up front).
import type { Engine } from '../../engine/engine';
import { add } from '../../engine/ops/elementwise';
import { copyInto } from '../../engine/ops/layout';
import { Tensor } from '../../engine/tensor';
import type { TalkerPrompt } from './prompt';
import { CodeSampler, TalkerSampler, UPSTREAM_SAMPLING, type SamplingOptions, type TalkerSamplingOptions } from './sampling';
import type { Qwen3TtsTalker } from './talker';

/** The prompt as talker inputs (talker dtype); free() them after generation. */
export interface PromptEmbeds {
  /** (1, L, hidden): the prefill. */
  embeds: Tensor;
  /** (T, hidden): added to the generated frames' inputs, one row per frame. */
  trailingText: Tensor;
  /** (1, hidden): added once the trailing text is used up. */
  ttsPad: Tensor;
}

export function freePromptEmbeds(p: PromptEmbeds): void {
  p.embeds.free();
  p.trailingText.free();
  p.ttsPad.free();
}

/**
 * Sums each prompt row's parts (prompt.ts): text_projection(text_embedding(text)) + codec_embedding(codes[0]) +
 * code_predictor.codec_embedding[g-1](codes[g]) + the speaker embedding (hidden,), one gather per part over all
 * rows that have it, added into the rows by runs of consecutive positions.
 */
export function embedPrompt(talker: Qwen3TtsTalker, prompt: TalkerPrompt, speaker?: Tensor | ArrayLike<number>): PromptEmbeds {
  const e = talker.engine;
  const H = talker.config.talker.hiddenSize;
  const G = talker.config.talker.numCodeGroups;
  const rows = prompt.rows;
  if (rows.length === 0) throw new RangeError('embedPrompt: the prompt has no rows');
  // each part's embeddings and an uploaded speaker vector are freed when this scope ends; a throw frees everything
  return e.scope(() => {
    const out = e.empty([1, rows.length, H], talker.dtype, 'talker prompt');
    e.fill(out, 0);
    const part = (has: (r: (typeof rows)[number]) => boolean, embed: (sel: number[]) => Tensor, pick: (i: number) => number) => {
      const sel = rows.flatMap((r, i) => (has(r) ? [i] : []));
      if (!sel.length) return;
      addRows(e, out, sel, embed(sel.map(pick)));
    };
    part((r) => r.text !== null, (ids) => talker.embedText(ids), (i) => rows[i]!.text!);
    part((r) => r.codes.length > 0, (ids) => talker.embedCodec(ids), (i) => rows[i]!.codes[0]!);
    for (const [i, r] of rows.entries()) {
      if (r.codes.length > 1 && r.codes.length !== G) throw new RangeError(`embedPrompt: row ${i} has ${r.codes.length} codes (1 or ${G})`);
    }
    for (let g = 1; g < G; g++) {
      part((r) => r.codes.length === G, (ids) => predictor(talker).embedCodes(g, ids), (i) => rows[i]!.codes[g]!);
    }
    const spkRows = rows.flatMap((r, i) => (r.speaker ? [i] : []));
    if (spkRows.length) {
      if (!speaker) throw new RangeError('embedPrompt: the prompt has a speaker slot and no speaker embedding was given');
      const spk = speaker instanceof Tensor ? speaker : e.upload(speaker, [H], talker.dtype, 'speaker embedding');
      if (spk.numel !== H || spk.dtype !== talker.dtype) throw new RangeError(`embedPrompt: speaker embedding ${spk} must be ${talker.dtype}[${H}]`);
      addRows(e, out, spkRows, spk.reshape([1, H]).expand([spkRows.length, H]));
    }
    return { embeds: out, trailingText: talker.embedText(prompt.trailingText), ttsPad: talker.embedText([prompt.ttsPad]) };
  }, 'tts prompt');
}

/** x (1, L, H) rows[j] += part[j] (part (n, H)), by runs of consecutive rows. */
function addRows(e: Engine, x: Tensor, rows: number[], part: Tensor): void {
  for (let j = 0; j < rows.length; ) {
    let n = 1;
    while (j + n < rows.length && rows[j + n] === rows[j]! + n) n++;
    const dst = x.slice(1, rows[j]!, rows[j]! + n);
    e.scope(() => copyInto(e, add(e, dst, part.slice(0, j, j + n).unsqueeze(0)), dst)); // the sum freed once copied
    j += n;
  }
}

export interface GenerateOptions {
  /** Most codebook-0 tokens (upstream max_new_tokens): at most maxNewTokens - 1 frames. */
  maxNewTokens: number;
  /** Codec eos is masked until this many tokens exist (upstream: 2). */
  minNewTokens?: number;
  /** Talker sampling; default upstream's generation_config (sampled, T 0.9, top-k 50, penalty 1.05). */
  talker?: Partial<TalkerSamplingOptions>;
  /** Code predictor sampling ("subtalker"); default sampled, T 0.9, top-k 50. */
  subtalker?: Partial<SamplingOptions>;
  /** RNG seed of every draw (u32). Default 0. */
  seed?: number;
  /** Checked before the prefill and between frames: an abort throws signal.reason. */
  signal?: AbortSignal;
  /** Called with each finished frame (16 codes) and its index. */
  onFrame?: (codes: readonly number[], index: number) => void;
  /** Test hooks: see the raw logits before they are used (the tensors are freed after the hook returns). */
  inspect?: {
    talkerLogits?: (step: number, logits: Tensor) => Promise<void> | void;
    codeLogits?: (frame: number, group: number, logits: Tensor) => Promise<void> | void;
  };
}

export interface GenerateResult {
  /** Frames x numCodeGroups codes (codebook 0 first), the frames before codec eos. */
  frames: number[][];
  /** Every codebook-0 token picked, in order (the eos or the max_new_tokens-th one last). */
  tokens: number[];
  stop: 'eos' | 'max_new_tokens';
}

/** Runs the talker + code predictor loop on an embedded prompt (embedPrompt). */
export async function generateCodes(talker: Qwen3TtsTalker, prompt: PromptEmbeds, o: GenerateOptions): Promise<GenerateResult> {
  const e = talker.engine;
  const cfg = talker.config.talker;
  const cp = predictor(talker);
  const G = cfg.numCodeGroups;
  const H = cfg.hiddenSize;
  if (!Number.isInteger(o.maxNewTokens) || o.maxNewTokens < 1) throw new RangeError(`generateCodes: maxNewTokens ${o.maxNewTokens} must be a positive integer`);
  const minNewTokens = o.minNewTokens ?? 2;
  const seed = (o.seed ?? 0) >>> 0;
  const T = prompt.trailingText.shape[0]!;
  if (prompt.trailingText.rank !== 2 || prompt.trailingText.shape[1] !== H) throw new RangeError(`generateCodes: trailingText ${prompt.trailingText} must be (T, ${H})`);
  if (prompt.ttsPad.numel !== H) throw new RangeError(`generateCodes: ttsPad ${prompt.ttsPad} must hold ${H} values`);
  const ttsPad = prompt.ttsPad.reshape([1, H]);
  o.signal?.throwIfAborted();

  const L = prompt.embeds.shape[1]!;
  const owned: { free(): void }[] = [];
  const cache = talker.createCache(L + o.maxNewTokens);
  owned.push(cache);
  let hidden: Tensor | null = null;
  let logits: Tensor | null = null;
  try {
    const cpCache = cp.createCache();
    owned.push(cpCache);
    const talkerPick = new TalkerSampler(e, talker.dtype, cfg.vocabSize, cfg.codec.eos, {
      ...UPSTREAM_SAMPLING.talker,
      ...o.talker,
      seed,
      groups: G,
      minNewTokens,
      maxNewTokens: o.maxNewTokens,
    });
    owned.push(talkerPick);
    const codePick = new CodeSampler(e, talker.config.codebookSize, { ...UPSTREAM_SAMPLING.subtalker, ...o.subtalker, seed, groups: G });
    owned.push(codePick);

    ({ hidden, logits } = talker.forward({ embeds: prompt.embeds, cache, lastOnly: true }));
    const frames: number[][] = [];
    const tokens: number[] = [];
    for (;;) {
      await o.inspect?.talkerLogits?.(tokens.length, logits);
      const step = talkerPick.count;
      const c0 = talkerPick.drawNext(logits); // (1) int32 id on the GPU
      logits.free();
      logits = null;
      // the last token, or a test watching the code logits (its hook must see only the frames that are kept): c0 now
      if (step + 1 >= o.maxNewTokens || o.inspect?.codeLogits) {
        const token = (await talkerPick.readFrame(step, 1))[0]!;
        if (token === cfg.codec.eos || step + 1 >= o.maxNewTokens) {
          tokens.push(token);
          return { frames, tokens, stop: token === cfg.codec.eos ? 'eos' : 'max_new_tokens' };
        }
      }
      o.signal?.throwIfAborted();

      const f = frames.length;
      const rowsSoFar = hidden.shape[1]!;
      const pastHidden = hidden.slice(1, rowsSoFar - 1, rowsSoFar); // (1, 1, H): upstream's past_hidden
      const code0 = talker.embedCodec(c0).reshape([1, 1, H]);
      let sum: Tensor | null;
      try {
        const pick = async (l: Tensor, group: number) => {
          await o.inspect?.codeLogits?.(f, group, l);
          return codePick.drawInto(l, f, group, talkerPick.slot(step, group));
        };
        ({ sum } = await cp.predict(pastHidden, code0, cpCache, pick, code0));
      } finally {
        code0.free();
      }
      hidden.free();
      hidden = null;
      let frame: number[];
      try {
        frame = await talkerPick.readFrame(step); // the one readback of the frame: [c0, c1..c15]
      } catch (err) {
        sum!.free();
        throw err;
      }
      tokens.push(frame[0]!);
      if (frame[0] === cfg.codec.eos) {
        sum!.free();
        return { frames, tokens, stop: 'eos' };
      }
      frames.push(frame);
      o.onFrame?.(frame, f);

      const text = f < T ? prompt.trailingText.slice(0, f, f + 1) : ttsPad;
      const x = add(e, sum!, text); // (1, 1, H)
      sum!.free();
      try {
        ({ hidden, logits } = talker.forward({ embeds: x, cache, lastOnly: true }));
      } finally {
        x.free();
      }
    }
  } finally {
    logits?.free();
    hidden?.free();
    for (const t of owned.reverse()) t.free();
  }
}

function predictor(talker: Qwen3TtsTalker) {
  if (!talker.code_predictor) throw new Error('Qwen3-TTS: the code predictor was not loaded');
  return talker.code_predictor;
}
