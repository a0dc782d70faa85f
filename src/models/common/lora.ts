// LoRA files for the image models (issue 46): reading one safetensors LoRA, in either community key style, and
// mapping it onto the Kiln model's own linear layers. Applying it is lora-linear.ts; the per-model module tables are
// lora-models.ts; docs/loras.md says what is built.
//
// Key styles (one module stem, then its tensors):
//   diffusers / PEFT   <stem>.lora_A.weight [r, K], <stem>.lora_B.weight [N, r], optional <stem>.alpha
//                      stems behind a wrapper: transformer. (diffusers' save_lora_weights), diffusion_model.
//                      (ComfyUI / reference trainers), base_model.model. (PEFT / ai-toolkit); a diffusers file may
//                      carry lora_alpha / alpha_pattern in its __metadata__ "lora_adapter_metadata" (the PEFT config)
//   kohya              lora_unet_<module path with _ for .>.lora_down.weight [r, K], .lora_up.weight [N, r], .alpha
//                      (also lora_transformer_<...>, the prefix kohya-style trainers write for DiT models)
// The alpha rule: the term added beside a linear is  scale * (alpha / r) * up @ down  (PEFT's scaling lora_alpha / r,
// kohya's alpha / dim); a module without alpha has alpha = r (factor 1). The per-request scale multiplies it.
// Refused by name, never guessed: tensors that are not low-rank pairs (DoRA magnitudes, full "diff" patches, LoCon
// mid tensors, biases), text-encoder parts, a module that no linear of the model has (a few are listed, with the model
// the names do fit when it is another one Kiln knows), and a pair whose shape does not fit its linear.
import { stat } from 'node:fs/promises';
import { Checkpoint, CheckpointError } from '../../engine/safetensors';

export type LoraKeyStyle = 'peft' | 'kohya';

/** The LoRA-able linears of one model: Kiln's module names (its checkpoint keys without `.weight`) and shapes. */
export interface LoraModelNames {
  /** Short id ("krea2", "qwen_image21"). */
  model: string;
  /** For messages ("Krea 2"). */
  label: string;
  /** Kiln module name -> [out N, in K]. */
  modules: ReadonlyMap<string, readonly [number, number]>;
  /** Another community's name of a module (diffusers' for Krea 2, ...) -> Kiln's; undefined when it is none. */
  alias(stem: string): string | undefined;
  /** Every alias stem of `module` the model knows (for the kohya underscore table). */
  aliasesOf(module: string): string[];
}

/** One low-rank pair, mapped onto a Kiln module. */
export interface LoraPair {
  /** Kiln module name (e.g. "blocks.3.attn.wq"). */
  module: string;
  /** The stem as the file names it. */
  source: string;
  /** down / lora_A [r, K] and up / lora_B [N, r], float32 row-major. */
  down: Float32Array;
  up: Float32Array;
  rank: number;
  /** The alpha stored with the pair (undefined: none, i.e. alpha = rank). */
  alpha?: number;
  /** alpha / rank (1 without alpha). */
  factor: number;
}

export interface LoraFile {
  path: string;
  model: string;
  style: LoraKeyStyle;
  /** By Kiln module name. */
  pairs: Map<string, LoraPair>;
  /** Host bytes held (the cache's measure). */
  bytes: number;
}

export class LoraError extends CheckpointError {}

const WRAPPERS = ['base_model.model.', 'diffusion_model.', 'model.diffusion_model.', 'transformer.'];
const KOHYA_PREFIXES = ['lora_unet_', 'lora_transformer_'];
const TEXT_ENCODER = /^(lora_te\d?_|text_encoder(_\d)?\.|te\d?\.|lora_te)/;
const ROLES: [suffix: string, role: 'down' | 'up' | 'alpha', style: LoraKeyStyle | null][] = [
  ['.lora_A.weight', 'down', 'peft'],
  ['.lora_B.weight', 'up', 'peft'],
  ['.lora_down.weight', 'down', 'kohya'],
  ['.lora_up.weight', 'up', 'kohya'],
  ['.alpha', 'alpha', null],
];
/** diffusers' save_lora_weights metadata key (the PEFT LoraConfig as JSON). */
const ADAPTER_METADATA = 'lora_adapter_metadata';

const few = (xs: string[], n = 4) => `${xs.slice(0, n).join(', ')}${xs.length > n ? `, ... (${xs.length} in all)` : ''}`;
export const underscored = (name: string) => name.replace(/\./g, '_');

/** Kiln's module for a stem as the file names it (wrappers stripped, kohya underscores resolved); undefined if none. */
export function resolveModule(names: LoraModelNames, stem: string): string | undefined {
  for (const p of KOHYA_PREFIXES) {
    if (stem.startsWith(p)) return kohyaTable(names).get(stem.slice(p.length));
  }
  let s = stem;
  for (let again = true; again; ) {
    again = false;
    for (const w of WRAPPERS) {
      if (s.startsWith(w)) {
        s = s.slice(w.length);
        again = true;
      }
    }
  }
  if (names.modules.has(s)) return s;
  return names.alias(s);
}

const kohyaTables = new WeakMap<LoraModelNames, Map<string, string>>();

/** underscored name (Kiln's, or any alias) -> Kiln module; a name two modules share would be ambiguous: refused. */
function kohyaTable(names: LoraModelNames): Map<string, string> {
  let t = kohyaTables.get(names);
  if (t) return t;
  t = new Map();
  const clash = new Set<string>();
  for (const m of names.modules.keys()) {
    for (const n of [m, ...names.aliasesOf(m)]) {
      const u = underscored(n);
      if (t.has(u) && t.get(u) !== m) clash.add(u);
      t.set(u, m);
    }
  }
  for (const u of clash) t.delete(u);
  kohyaTables.set(names, t);
  return t;
}

interface Group {
  down?: string;
  up?: string;
  alpha?: string;
  style?: LoraKeyStyle;
}

/** Per-module alpha from diffusers' adapter metadata (lora_alpha, alpha_pattern; r, rank_pattern), by file stem. */
function metadataAlpha(meta: Record<string, string>, path: string): ((stem: string, rank: number) => number | undefined) | undefined {
  const raw = meta[ADAPTER_METADATA];
  if (raw === undefined) return undefined;
  let cfg: Record<string, unknown>;
  try {
    cfg = JSON.parse(raw) as Record<string, unknown>;
  } catch (e) {
    throw new LoraError(`${path}: __metadata__ ${ADAPTER_METADATA} is not JSON (${(e as Error).message})`);
  }
  // diffusers writes one config per component, its keys prefixed ("transformer.lora_alpha"), or a bare config
  const pick = (k: string) => cfg[`transformer.${k}`] ?? cfg[k];
  const alpha = pick('lora_alpha');
  const pattern = (pick('alpha_pattern') ?? {}) as Record<string, number>;
  if (alpha === undefined && Object.keys(pattern).length === 0) return undefined;
  return (stem) => {
    for (const [k, v] of Object.entries(pattern)) {
      const key = k.replace(/^\^/, '');
      if (stem === key || stem.endsWith(`.${key}`)) return Number(v);
    }
    return alpha === undefined ? undefined : Number(alpha);
  };
}

/**
 * Reads a LoRA file and maps it onto `names`' modules. `others`: the other models Kiln knows, named in the refusal
 * when the file's modules are theirs.
 */
export async function readLora(path: string, names: LoraModelNames, others: readonly LoraModelNames[] = []): Promise<LoraFile> {
  const ckpt = await Checkpoint.open(path);
  try {
    const groups = new Map<string, Group>();
    const strange: string[] = [];
    const textEncoder: string[] = [];
    for (const key of ckpt.keys()) {
      const role = ROLES.find(([s]) => key.endsWith(s));
      if (!role) {
        strange.push(key);
        continue;
      }
      const stem = key.slice(0, -role[0].length);
      if (TEXT_ENCODER.test(stem)) {
        textEncoder.push(key);
        continue;
      }
      const g = groups.get(stem) ?? {};
      g[role[1]] = key;
      if (role[2]) g.style = role[2];
      groups.set(stem, g);
    }
    if (strange.length) {
      throw new LoraError(`${path}: ${strange.length} tensors are not low-rank LoRA pairs (${few(strange)}); Kiln applies lora_A/lora_B or ` +
        'lora_down/lora_up pairs (with alpha) only');
    }
    if (textEncoder.length) throw new LoraError(`${path}: has text-encoder tensors (${few(textEncoder)}); Kiln applies LoRAs to the ${names.label} transformer only`);
    if (groups.size === 0) throw new LoraError(`${path}: no LoRA tensors`);
    const styles = new Set([...groups.values()].map((g) => g.style));
    const unmatched: string[] = [];
    const stems = new Map<string, string>();
    for (const stem of groups.keys()) {
      const m = resolveModule(names, stem);
      if (m === undefined) unmatched.push(stem);
      else stems.set(stem, m);
    }
    if (unmatched.length) {
      const fits = others.filter((o) => o.model !== names.model && unmatched.every((s) => resolveModule(o, s) !== undefined));
      const whose = fits.length ? `: they are ${fits.map((o) => o.label).join(' / ')} modules, a LoRA for another model` : '';
      const what = unmatched.length === groups.size ? `none of its ${groups.size} modules is` : `${unmatched.length} of its ${groups.size} modules are not`;
      throw new LoraError(`${path}: ${what} a ${names.label} linear (${few(unmatched)})${whose}`);
    }
    const alphaOf = metadataAlpha(ckpt.metadata, path);
    const pairs = new Map<string, LoraPair>();
    let bytes = 0;
    for (const [stem, g] of groups) {
      const module = stems.get(stem)!;
      if (!g.down || !g.up) throw new LoraError(`${path}: ${stem} has ${g.down ? 'no up (lora_B / lora_up)' : 'no down (lora_A / lora_down)'} matrix`);
      if (pairs.has(module)) throw new LoraError(`${path}: two pairs for ${names.label}'s ${module} (${pairs.get(module)!.source}, ${stem})`);
      const de = ckpt.entry(g.down);
      const ue = ckpt.entry(g.up);
      const [N, K] = names.modules.get(module)!;
      const rank = de.shape[0]!;
      if (de.shape.length !== 2 || ue.shape.length !== 2 || ue.shape[1] !== rank || rank < 1) {
        throw new LoraError(`${path}: ${stem}: down [${de.shape}] and up [${ue.shape}] are not a rank-r pair`);
      }
      if (de.shape[1] !== K || ue.shape[0] !== N) {
        throw new LoraError(`${path}: ${stem}: the pair is [${ue.shape[0]}, ${de.shape[1]}] (out, in), ${names.label}'s ${module} is [${N}, ${K}]: ` +
          'a LoRA for another size or model');
      }
      let alpha: number | undefined;
      if (g.alpha) {
        const a = await ckpt.readFloat32(g.alpha);
        if (a.length !== 1) throw new LoraError(`${path}: ${g.alpha} holds ${a.length} values, not one`);
        alpha = a[0]!;
      } else alpha = alphaOf?.(stem.replace(/^transformer\./, ''), rank);
      if (alpha !== undefined && !(Number.isFinite(alpha) && alpha > 0)) throw new LoraError(`${path}: ${stem}: alpha ${alpha} is not a positive number`);
      const down = await ckpt.readFloat32(g.down);
      const up = await ckpt.readFloat32(g.up);
      bytes += (down.length + up.length) * 4;
      pairs.set(module, { module, source: stem, down, up, rank, alpha, factor: alpha === undefined ? 1 : alpha / rank });
    }
    return { path, model: names.model, style: styles.has('kohya') ? 'kohya' : 'peft', pairs, bytes };
  } finally {
    await ckpt.close();
  }
}

/**
 * Loaded LoRAs kept in host memory, least recently used dropped first once their bytes pass `maxBytes`. A file is
 * known by its path, size and modification time (a changed file is read again) and the model it was mapped for.
 */
export class LoraCache {
  private readonly entries = new Map<string, { file: LoraFile; at: number }>();
  private held = 0;
  private tick = 0;

  constructor(readonly maxBytes: number) {
    if (!(maxBytes > 0)) throw new RangeError(`LoraCache: maxBytes ${maxBytes} must be > 0`);
  }

  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.size;
  }

  async load(path: string, names: LoraModelNames, others: readonly LoraModelNames[] = []): Promise<LoraFile> {
    const st = await stat(path);
    const key = `${names.model}\u0000${path}\u0000${st.size}\u0000${st.mtimeMs}`;
    const hit = this.entries.get(key);
    if (hit) {
      hit.at = ++this.tick;
      return hit.file;
    }
    const file = await readLora(path, names, others);
    for (const [k, v] of this.entries) {
      if (k.startsWith(`${names.model}\u0000${path}\u0000`)) this.drop(k, v.file); // an older version of the file
    }
    this.entries.set(key, { file, at: ++this.tick });
    this.held += file.bytes;
    while (this.held > this.maxBytes && this.entries.size > 1) {
      let oldest: string | undefined;
      let at = Infinity;
      for (const [k, v] of this.entries) if (v.at < at && v.file !== file) [oldest, at] = [k, v.at];
      if (oldest === undefined) break;
      this.drop(oldest, this.entries.get(oldest)!.file);
    }
    return file;
  }

  has(path: string, model: string): boolean {
    for (const k of this.entries.keys()) if (k.startsWith(`${model}\u0000${path}\u0000`)) return true;
    return false;
  }

  private drop(key: string, file: LoraFile): void {
    this.entries.delete(key);
    this.held -= file.bytes;
  }
}
