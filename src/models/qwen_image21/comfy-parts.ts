// Qwen-Image-2.1's parts as a ComfyUI install keeps them: one .safetensors file per part, in ComfyUI's key names, with
// no config.json beside it. Read here as:
//   transformer (diffusion_models/): ComfyUI's names are diffusers' under model.diffusion_model. (or no prefix), but for
//     its fused SwiGLU weight img_mlp.gate_up = [gate_layer; proj], read as the two (engine/comfy-keys.ts
//     comfyQwenImage21DitRename, a row range each: no copy). The config is read off the shapes (layers, heads from
//     norm_q's head dim, channels, context width, mlp ratio); the one thing shapes do not show, the RoPE split of the
//     head dim, is the known layout's of that head dim: the released model's (128: [16, 56, 56]) or Kiln's demo's
//     (32: [8, 12, 12]). Another head dim is refused by name. A city96-style GGUF of it (the same names, no prefix;
//     blocks dequantised at load, engine/gguf.ts) is read the same way, a fused gate_up's halves whole rows of blocks.
//   text encoder (text_encoders/ or clip/, a Qwen3-VL-8B file: ComfyUI's model. / visual. names mapped onto
//     transformers' by engine/comfy-keys.ts comfyQwenVlRename). The config is a known layout whose sizes the shapes show:
//     the released text model (released.ts QWEN3_VL_8B_TEXT_REPORTED; its vision tower's config is not known here, so
//     the tower is not loaded and references are refused) or Kiln's demo (demo.ts, with its vision tower). Special-token
//     ids are the tokenizer's (the processor folder the pipeline reads), as a ComfyUI file carries none.
// The other parts and the pipeline's small files (model_index, processor, scheduler) come from wherever the weights
// check found them (checkpoint.ts QwenImage21Layout).
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { comfyQwenImage21DitRename, comfyQwenVlRename, ComfyKeysError } from '../../engine/comfy-keys';
import { Checkpoint } from '../../engine/safetensors';
import { qwen3VlShapeSizes } from '../common/qwen3-vl-shapes';
import { parseQwenImage21Config, QWEN_IMAGE21_DEFAULTS, type QwenImage21Config } from './config';
import { parseQwen3Config, type Qwen3Config } from '../qwen3/config';
import { parseQwen3VlVisionConfig, type Qwen3VlVisionConfig } from '../qwen3_vl_vision';
import { demoTokenizerInfo, type TextTokenizer } from '../tokenizer';
import { DEMO_QWEN_IMAGE21_TOKENS, DEMO_TRANSFORMER_CONFIG, demoTextEncoderConfig } from './demo-configs';
import { QWEN3_VL_8B_TEXT_REPORTED } from './released';
import { diffusersWeights } from './transformer';

/** A part given as one file (ComfyUI's: safetensors, or a city96-style GGUF of the transformer), not a folder. */
export const isSingleFile = (p: string): boolean => /\.(safetensors|gguf)$/.test(p) && existsSync(p) && statSync(p).isFile();

/** The RoPE split per head dim of the layouts Kiln knows (the shapes show the head dim, not its split). */
const knownRope = (): { name: string; headDim: number; axes: readonly number[] }[] => [
  { name: 'the released Qwen-Image-2.1', headDim: QWEN_IMAGE21_DEFAULTS.attention_head_dim, axes: QWEN_IMAGE21_DEFAULTS.axes_dims_rope },
  { name: 'Kiln\'s demo', headDim: DEMO_TRANSFORMER_CONFIG.attention_head_dim, axes: DEMO_TRANSFORMER_CONFIG.axes_dims_rope },
];

/** transformer/config.json's values read off a transformer's shapes (diffusers' names: after the rename). */
export function qwenImage21ConfigFromShapes(shape: (key: string) => readonly number[] | undefined, keys: readonly string[], where: string): QwenImage21Config {
  const need = (k: string): readonly number[] => {
    const s = shape(k);
    if (!s) throw new ComfyKeysError(`${where}: no "${k}"; a Qwen-Image-2.1 transformer has it`);
    return s;
  };
  const [dim, inChannels] = need('img_in.weight') as [number, number];
  const headDim = need('transformer_blocks.0.attn.norm_q.weight')[0]!;
  const layers = new Set(keys.map((k) => /^transformer_blocks\.(\d+)\./.exec(k)?.[1]).filter((x) => x !== undefined)).size;
  const known = knownRope();
  const rope = known.find((r) => r.headDim === headDim);
  if (!rope) throw new ComfyKeysError(`${where}: attention head dim ${headDim} (transformer_blocks.0.attn.norm_q); expected ${known.map((r) => `${r.headDim} (${r.name})`).join(' or ')}`);
  const mlp = need('transformer_blocks.0.img_mlp.gate_layer.weight')[0]!;
  const json = {
    _class_name: 'QwenImage21Transformer2DModel',
    attention_head_dim: headDim,
    axes_dims_rope: [...rope.axes],
    in_channels: inChannels,
    out_channels: need('proj_out.weight')[0]!,
    num_attention_heads: dim / headDim,
    num_layers: layers,
    patch_size: 1,
    context_in_dim: need('txt_in.in_layer.weight')[1]!,
    mlp_ratio: mlp / dim,
  };
  if (!Number.isInteger(json.num_attention_heads) || !Number.isInteger(json.mlp_ratio)) {
    throw new ComfyKeysError(`${where}: width ${dim} with head dim ${headDim} and SwiGLU width ${mlp} is no Qwen-Image-2.1 layout (whole heads, a whole mlp ratio)`);
  }
  return parseQwenImage21Config(json, `${where} (shapes, as ${rope.name})`);
}

/** The transformer weights at `path`: a ComfyUI single file read under diffusers' names (see the header), or a
 * diffusers transformer/ folder (its index and shards, or its one file). Close the returned checkpoint. */
export async function openQwenImage21Transformer(path: string): Promise<Checkpoint> {
  if (!isSingleFile(path)) return Checkpoint.open(diffusersWeights(path));
  const opened = await Checkpoint.open(path);
  try {
    return opened.renamed(comfyQwenImage21DitRename(opened.keys(), (k) => opened.entry(k).dtype, (k) => opened.entry(k).shape[0]!, path));
  } catch (e) {
    await opened.close();
    throw e;
  }
}

/** The transformer config of a ComfyUI file, read off its shapes (the weights are not read). */
export async function qwenImage21TransformerConfigOfFile(file: string): Promise<QwenImage21Config> {
  const ck = await openQwenImage21Transformer(file);
  try {
    return qwenImage21ConfigFromShapes((k) => (ck.has(k) ? ck.entry(k).shape : undefined), ck.keys(), file);
  } finally {
    await ck.close();
  }
}

/** The same from a safetensors file's header alone, synchronously (a profile's LoRA check asks without awaiting). */
export function qwenImage21TransformerConfigOfFileSync(file: string): QwenImage21Config {
  if (!file.endsWith('.safetensors')) throw new ComfyKeysError(`${file}: read synchronously from safetensors files only`);
  const fd = openSync(file, 'r');
  let header: Record<string, { dtype?: string; shape?: number[] }>;
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const n = Number(len.readBigUInt64LE(0));
    if (n > 100 * 2 ** 20) throw new ComfyKeysError(`${file}: a safetensors header of ${n} bytes: not a safetensors file`);
    const head = Buffer.alloc(n);
    readSync(fd, head, 0, n, 8);
    header = JSON.parse(head.toString('utf8')) as typeof header;
  } finally {
    closeSync(fd);
  }
  delete header.__metadata__;
  const keys = Object.keys(header);
  const rename = comfyQwenImage21DitRename(keys, (k) => header[k]!.dtype ?? '', (k) => header[k]!.shape?.[0] ?? 0, file);
  const shapes = new Map<string, number[]>();
  for (const k of keys) {
    const n = rename(k);
    const s = header[k]!.shape ?? [];
    if (typeof n === 'string') shapes.set(n, s);
    else if (n) for (const p of n) shapes.set(p.name, [p.rows[1] - p.rows[0], ...s.slice(1)]);
  }
  return qwenImage21ConfigFromShapes((k) => shapes.get(k), [...shapes.keys()], file);
}

// ---- the text encoder ----

type Json = Record<string, unknown>;

/** A Qwen3-VL text encoder file (ComfyUI's names or transformers'), read under transformers' names. */
export async function openQwenImage21TextEncoder(path: string): Promise<Checkpoint> {
  if (!isSingleFile(path)) return Checkpoint.open(path);
  const opened = await Checkpoint.open(path);
  try {
    return opened.renamed(comfyQwenVlRename(opened.keys(), path));
  } catch (e) {
    await opened.close();
    throw e;
  }
}

/** The Qwen3-VL layouts a Qwen-Image-2.1 text encoder file may have, with `tok`'s special-token ids. */
function knownTextEncoders(tok: TextTokenizer): { name: string; json: Json }[] {
  const ids = {
    image_token_id: tok.tokenId('<|image_pad|>'), video_token_id: tok.tokenId('<|video_pad|>'),
    vision_start_token_id: tok.tokenId('<|vision_start|>'), vision_end_token_id: tok.tokenId('<|vision_end|>'),
  };
  const textIds = { bos_token_id: tok.tokenId('<|endoftext|>'), eos_token_id: tok.tokenId('<|im_end|>') };
  const released = {
    architectures: ['Qwen3VLForConditionalGeneration'], model_type: 'qwen3_vl', tie_word_embeddings: false, ...ids,
    text_config: { ...QWEN3_VL_8B_TEXT_REPORTED, ...textIds },
  };
  const demo = demoTextEncoderConfig(demoTokenizerInfo({ specialTokens: DEMO_QWEN_IMAGE21_TOKENS }));
  const demoJson = { ...demo, ...ids, text_config: { ...(demo.text_config as Json), ...textIds } };
  return [{ name: 'Qwen3-VL-8B (text model; its vision tower\'s config is not known here)', json: released }, { name: 'Kiln\'s demo Qwen3-VL', json: demoJson }];
}

/** The sizes a config gives (the vision ones only where it has a vision tower: the others ignore the file's). */
function configSizes(json: Json): Record<string, number> {
  const t = json.text_config as Record<string, number>;
  const v = json.vision_config as Record<string, number> | undefined;
  return {
    hidden_size: t.hidden_size!, num_hidden_layers: t.num_hidden_layers!, intermediate_size: t.intermediate_size!,
    q_rows: t.num_attention_heads! * t.head_dim!, kv_rows: t.num_key_value_heads! * t.head_dim!, head_dim: t.head_dim!,
    ...(v ? { vision_depth: v.depth!, vision_hidden: v.hidden_size! } : {}),
  };
}

const fmtSizes = (s: Record<string, number>) => Object.entries(s).map(([k, v]) => `${k} ${v < 0 ? 'absent' : v}`).join(', ');

/** The text encoder config (and its vision tower's, null where not known) of a file, by its shapes (see the header). */
export async function qwenImage21TextEncoderConfigOfFile(file: string, tok: TextTokenizer): Promise<{ textEncoder: Qwen3Config; vision: Qwen3VlVisionConfig | null }> {
  const ck = await openQwenImage21TextEncoder(file);
  try {
    const found = qwen3VlShapeSizes(ck);
    const known = knownTextEncoders(tok);
    const hit = known.find((c) => Object.entries(configSizes(c.json)).every(([k, v]) => found[k] === v));
    if (!hit) {
      throw new ComfyKeysError(`${file}: a Qwen3-VL text encoder of sizes Qwen-Image-2.1 does not use (${fmtSizes(found)}); expected ${known.map((c) => `${c.name} (${fmtSizes(configSizes(c.json))})`).join(' or ')}`);
    }
    const json: Json = { ...hit.json, text_config: { ...(hit.json.text_config as Json), vocab_size: ck.entry('model.language_model.embed_tokens.weight').shape[0]! } };
    const where = `${file} (as ${hit.name})`;
    return { textEncoder: parseQwen3Config(json, 'text', where), vision: json.vision_config ? parseQwen3VlVisionConfig(json, where) : null };
  } finally {
    await ck.close();
  }
}
