// The talker's input rows for one voice-clone request, exactly as Qwen3TTSForConditionalGeneration.generate
// builds them (docs/models/qwen3-tts.md, "The talker prompt"). Pure ids: each row says which embeddings are summed at
// that position; the engine then computes
//   row = text_projection(text_embedding(text)) [if text]
//       + codec_embedding(codes[0]) + sum_{i>=1} code_predictor.codec_embedding[i-1](codes[i])  [if codes]
//       + speaker embedding [if speaker]
// and feeds `trailingText` (one text row per generated frame, then tts_pad) during generation.
// Golden-tested against upstream's own generate() (test/fixtures/golden/qwen3_tts/prompt/).
import type { Qwen3TtsConfig } from './config';

export interface PromptRow {
  /** Text id whose projected embedding is part of the row, or null. */
  text: number | null;
  /** [] none; [id] one talker codec id (specials, tags); numCodeGroups codes: a reference frame (ICL). */
  codes: number[];
  /** The speaker embedding is part of this row. */
  speaker: boolean;
}

export interface TalkerPrompt {
  rows: PromptRow[];
  /**
   * Text ids added to the generated frames' embeddings, one per step; after them, ttsPad every step. When the
   * whole text is already in the prompt this is [ttsPad] (upstream passes tts_pad_embed as the trailing text).
   */
  trailingText: number[];
  ttsPad: number;
}

export interface PromptRequest {
  /** Tokenizer ids of assistantText(text) (the whole templated string, tokenised at once). */
  inputIds: readonly number[];
  /** codecLanguageId(...) of the request: null for Auto. */
  languageId: number | null;
  /** 'xvec': speaker embedding only (no transcript); 'icl': in-context cloning from the reference codes. */
  mode: 'xvec' | 'icl';
  /** ICL: tokenizer ids of refText(ref_text). */
  refIds?: readonly number[];
  /** ICL: the reference clip's codes, frames x numCodeGroups (codec encoder output). */
  refCodes?: readonly (readonly number[])[];
  /** Upstream's non_streaming_mode (generate_voice_clone default: false, i.e. text streamed in during generation). */
  nonStreaming?: boolean;
}

export class TalkerPromptError extends Error {
  override readonly name = 'TalkerPromptError';
}

/** What the tokenizer sees for the text to speak (Qwen3TTSModel._build_assistant_text). */
export function assistantText(text: string): string {
  return `<|im_start|>assistant\n${text}<|im_end|>\n<|im_start|>assistant\n`;
}

/** What the tokenizer sees for the reference transcript (Qwen3TTSModel._build_ref_text). */
export function refText(text: string): string {
  return `<|im_start|>assistant\n${text}<|im_end|>\n`;
}

const ROLE = 3; // <|im_start|> assistant \n
const TAIL = 5; // <|im_end|> \n <|im_start|> assistant \n
const REF_TAIL = 2; // <|im_end|> \n

type Cfg = Pick<Qwen3TtsConfig, 'text' | 'talker'>;

export function buildTalkerPrompt(config: Cfg, req: PromptRequest): TalkerPrompt {
  const { text: t, talker } = config;
  const c = talker.codec;
  const ids = req.inputIds;
  if (ids.length < ROLE + TAIL + 1) throw new TalkerPromptError(`input ids: ${ids.length} ids hold no text between the template tokens`);
  checkTemplate(ids, [t.imStart, t.assistant], 0, 'input ids');
  checkTemplate(ids, [t.imEnd], ids.length - TAIL, 'input ids');
  checkTemplate(ids, [t.imStart, t.assistant], ids.length - 3, 'input ids');
  const role = ids.slice(0, ROLE);
  const text = ids.slice(ROLE, ids.length - TAIL);

  // Codec side: tags, language, speaker slot, pad, bos (speaker slot marked by null).
  const tags = req.languageId === null ? [c.nothink, c.thinkBos, c.thinkEos] : [c.think, c.thinkBos, req.languageId, c.thinkEos];
  const codec: (number | null)[] = [...tags, null, c.pad, c.bos];

  const rows: PromptRow[] = role.map((id) => ({ text: id, codes: [], speaker: false }));
  // All codec rows but the last (bos), with tts_pad text except the last of them, which gets tts_bos.
  for (let i = 0; i < codec.length - 1; i++) {
    const id = codec[i]!;
    rows.push({ text: i < codec.length - 2 ? t.ttsPad : t.ttsBos, codes: id === null ? [] : [id], speaker: id === null });
  }

  if (req.mode === 'icl') return withIcl(config, req, rows, text);
  if (req.mode !== 'xvec') throw new TalkerPromptError(`mode ${JSON.stringify(req.mode)} is not xvec or icl`);
  if (req.nonStreaming) {
    for (const id of text) rows.push({ text: id, codes: [c.pad], speaker: false });
    rows.push({ text: t.ttsEos, codes: [c.pad], speaker: false });
    rows.push({ text: t.ttsPad, codes: [c.bos], speaker: false });
    return { rows, trailingText: [t.ttsPad], ttsPad: t.ttsPad };
  }
  rows.push({ text: text[0]!, codes: [c.bos], speaker: false });
  return { rows, trailingText: [...text.slice(1), t.ttsEos], ttsPad: t.ttsPad };
}

/** generate_icl_prompt: the transcript + text stream against [bos, reference frames]. */
function withIcl(config: Cfg, req: PromptRequest, rows: PromptRow[], text: number[]): TalkerPrompt {
  const { text: t, talker } = config;
  const refIds = req.refIds;
  const frames = req.refCodes;
  if (!refIds || refIds.length < ROLE + REF_TAIL + 1) throw new TalkerPromptError('icl: reference transcript ids are missing or empty');
  checkTemplate(refIds, [t.imStart, t.assistant], 0, 'reference ids');
  checkTemplate(refIds, [t.imEnd], refIds.length - REF_TAIL, 'reference ids');
  if (!frames || frames.length === 0) throw new TalkerPromptError('icl: reference codes are missing');
  frames.forEach((f, i) => {
    if (f.length !== talker.numCodeGroups) throw new TalkerPromptError(`icl: reference frame ${i} has ${f.length} codes, not ${talker.numCodeGroups}`);
    f.forEach((code, g) => {
      // codebook 0 indexes the talker's codec table below the specials; the others the predictor's tables.
      if (!Number.isInteger(code) || code < 0 || code >= talker.vocabSize - 1024) {
        throw new TalkerPromptError(`icl: reference frame ${i} codebook ${g} code ${code} is not a code`);
      }
    });
  });
  const textStream = [...refIds.slice(ROLE, refIds.length - REF_TAIL), ...text, t.ttsEos];
  const codecStream: number[][] = [[talker.codec.bos], ...frames.map((f) => [...f])];
  if (req.nonStreaming) {
    for (const id of textStream) rows.push({ text: id, codes: [talker.codec.pad], speaker: false });
    for (const codes of codecStream) rows.push({ text: t.ttsPad, codes, speaker: false });
    return { rows, trailingText: [t.ttsPad], ttsPad: t.ttsPad };
  }
  for (let i = 0; i < codecStream.length; i++) {
    rows.push({ text: i < textStream.length ? textStream[i]! : t.ttsPad, codes: codecStream[i]!, speaker: false });
  }
  const rest = textStream.slice(codecStream.length);
  return { rows, trailingText: rest.length ? rest : [t.ttsPad], ttsPad: t.ttsPad };
}

function checkTemplate(ids: readonly number[], want: number[], at: number, what: string): void {
  want.forEach((id, k) => {
    if (ids[at + k] !== id) {
      throw new TalkerPromptError(`${what}: expected id ${id} at ${at + k} (the chat template), found ${ids[at + k]}`);
    }
  });
}
