// Krea 2's text encoder and VAE as a ComfyUI install keeps them: one .safetensors file each (text_encoders/ or clip/,
// vae/), in ComfyUI's key names, with no config.json and no tokenizer (ComfyUI ships those in its code). Read here as:
//   text encoder: keys mapped to transformers' Qwen3-VL names (engine/comfy-keys.ts comfyQwenVlRename); the config is
//     a known Qwen3-VL layout picked by the file's shapes, as ComfyUI picks its Qwen3VL_4BConfig: the released
//     Qwen3-VL-4B-Instruct (released.ts QWEN3_VL_4B), or Kiln's tiny demo layout (demo.ts) with the real token ids;
//     the tokenizer is the real Qwen3-VL one shipped in assets/tokenizers/qwen3-vl/ (the layout's `tokenizer`); the
//     image processor upstream's.
//   VAE: Wan 2.1 names mapped to diffusers' AutoencoderKLQwenImage (comfyWanVaeRename); the config the class
//     defaults (the released VAE's, as released.ts plans it) or the demo's base_dim, picked by decoder.conv_in's shape.
// A file whose shapes fit no known layout is refused by name, with the sizes found and those expected.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { comfyQwenVlRename, comfyWanVaeRename, ComfyKeysError } from '../../engine/comfy-keys';
import type { Engine } from '../../engine/engine';
import { Checkpoint } from '../../engine/safetensors';
import { qwen3VlShapeSizes } from '../common/qwen3-vl-shapes';
import type { ComputeDType } from '../common/weights';
import { parseQwen3Config } from '../qwen3';
import { parseQwen3VlVisionConfig, QWEN3_VL_IMAGE_PROCESSOR } from '../qwen3_vl_vision';
import { demoTokenizerInfo, TextTokenizer, type TokenizerConfigJson } from '../tokenizer';
import { Krea2Conditioner } from './conditioner';
import { DEMO_KREA2_TOKENS, DEMO_KREA2_VAE, demoKrea2TextEncoderConfig } from './demo';
import { QWEN3_VL_4B } from './released';
import { Krea2Vae, parseQwenImageVaeConfig, QWEN_IMAGE_VAE_DEFAULTS } from './vae';

/** A part given as one file (ComfyUI's), not a folder. */
export const isSingleFile = (p: string): boolean => p.endsWith('.safetensors') && existsSync(p) && statSync(p).isFile();

/** The shipped Qwen3-VL tokenizer, under the repository root (the worker joins it to projectRoot()): the real BPE
 * (vocab.json.gz, merges.txt.gz) and Qwen3-VL-4B-Instruct's tokenizer_config.json. */
export const QWEN3_VL_TOKENIZER_DIR = 'assets/tokenizers/qwen3-vl';

/** The tokenizer of a folder laid out as QWEN3_VL_TOKENIZER_DIR. */
export function shippedQwen3VlTokenizer(dir: string): TextTokenizer {
  return TextTokenizer.fromSources({
    vocab: JSON.parse(gunzipSync(readFileSync(join(dir, 'vocab.json.gz'))).toString('utf8')) as Record<string, number>,
    merges: gunzipSync(readFileSync(join(dir, 'merges.txt.gz'))).toString('utf8'),
    config: JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as TokenizerConfigJson,
  });
}

type Json = Record<string, unknown>;

/** The Qwen3-VL layouts a Krea 2 text encoder file may have: the released one, and the demo's sizes with the released
 * config's token ids (a demo model read with the real tokenizer, as the tests build it). */
function knownTextEncoders(): { name: string; json: Json }[] {
  const demo = demoKrea2TextEncoderConfig(demoTokenizerInfo({ specialTokens: DEMO_KREA2_TOKENS }));
  const ids = { bos_token_id: QWEN3_VL_4B.text_config.bos_token_id, eos_token_id: QWEN3_VL_4B.text_config.eos_token_id };
  const demoJson = {
    ...QWEN3_VL_4B,
    tie_word_embeddings: demo.tie_word_embeddings,
    text_config: { ...QWEN3_VL_4B.text_config, ...(demo.text_config as Json), ...ids },
    vision_config: demo.vision_config,
  };
  return [{ name: 'Qwen3-VL-4B-Instruct', json: QWEN3_VL_4B as unknown as Json }, { name: 'Kiln\'s demo Qwen3-VL', json: demoJson }];
}

function configSizes(json: Json): Record<string, number> {
  const t = json.text_config as Record<string, number>;
  const v = json.vision_config as Record<string, number>;
  return {
    hidden_size: t.hidden_size!, num_hidden_layers: t.num_hidden_layers!, intermediate_size: t.intermediate_size!,
    q_rows: t.num_attention_heads! * t.head_dim!, kv_rows: t.num_key_value_heads! * t.head_dim!, head_dim: t.head_dim!,
    vision_depth: v.depth!, vision_hidden: v.hidden_size!,
  };
}

const fmtSizes = (s: Record<string, number>) => Object.entries(s).map(([k, v]) => `${k} ${v < 0 ? 'absent' : v}`).join(', ');

/** Krea 2's conditioner from a ComfyUI text encoder file (see the header). */
export async function krea2ConditionerFromFile(e: Engine, file: string, tokenizerDir: string, o: { dtype?: ComputeDType; styles?: boolean; layersOnHost?: boolean } = {}): Promise<Krea2Conditioner> {
  const opened = await Checkpoint.open(file);
  let ck: Checkpoint = opened;
  try {
    ck = opened.renamed(comfyQwenVlRename(opened.keys(), file));
    const found = qwen3VlShapeSizes(ck);
    const known = knownTextEncoders();
    // a file may stop before the last layers (Krea 2 reads the decoder up to its last tap, layer 35 of 36)
    const fits = (k: string, v: number) => (k === 'num_hidden_layers' ? found[k]! > 0 && found[k]! <= v : found[k] === v);
    const hit = known.find((c) => Object.entries(configSizes(c.json)).every(([k, v]) => fits(k, v)));
    if (!hit) {
      throw new ComfyKeysError(`${file}: a Qwen3-VL text encoder of sizes Krea 2 does not use (${fmtSizes(found)}); expected ${known.map((c) => `${c.name} (${fmtSizes(configSizes(c.json))})`).join(' or ')}`);
    }
    const vocab = ck.entry('model.language_model.embed_tokens.weight').shape[0]!;
    const json = { ...hit.json, text_config: { ...(hit.json.text_config as Json), vocab_size: vocab } };
    const where = `${file} (as ${hit.name})`;
    const tokenizer = shippedQwen3VlTokenizer(tokenizerDir);
    const vision = o.styles ? { config: parseQwen3VlVisionConfig(json, where), processor: QWEN3_VL_IMAGE_PROCESSOR } : undefined;
    return await Krea2Conditioner.load(e, ck, parseQwen3Config(json, 'text', where), { dtype: o.dtype, tokenizer, vision, layersOnHost: o.layersOnHost });
  } finally {
    await ck.close();
    if (ck !== opened) await opened.close();
  }
}

/** Krea 2's VAE (the Qwen-Image VAE) from a ComfyUI vae/ file (see the header). */
export async function krea2VaeFromFile(e: Engine, file: string, o: { dtype?: ComputeDType } = {}): Promise<Krea2Vae> {
  const opened = await Checkpoint.open(file);
  let ck: Checkpoint = opened;
  try {
    ck = opened.renamed(comfyWanVaeRename(opened.keys(), file));
    const shape = ck.has('decoder.conv_in.weight') ? ck.entry('decoder.conv_in.weight').shape : [];
    const known = [{ name: 'the Qwen-Image VAE', raw: QWEN_IMAGE_VAE_DEFAULTS as unknown as Json }, { name: 'Kiln\'s demo VAE', raw: DEMO_KREA2_VAE as unknown as Json }];
    const want = (raw: Json) => [(raw.base_dim as number) * (raw.dim_mult as number[]).at(-1)!, raw.z_dim as number];
    const hit = known.find((c) => want(c.raw)[0] === shape[0] && want(c.raw)[1] === shape[1]);
    if (!hit) throw new ComfyKeysError(`${file}: decoder.conv_in is [${shape.join(', ')}]; expected ${known.map((c) => `${c.name}'s [${want(c.raw).join(', ')}, ...]`).join(' or ')}`);
    return await Krea2Vae.load(e, ck, parseQwenImageVaeConfig(hit.raw, `${file} (as ${hit.name})`), o);
  } finally {
    await ck.close();
    if (ck !== opened) await opened.close();
  }
}
