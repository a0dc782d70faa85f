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
import { planLora, type LoraKeyStyle, type LoraModelNames } from '../../catalog/loras';
import { Checkpoint, CheckpointError } from '../../engine/safetensors';

// The key rules and module tables are the catalog's (catalog/loras.ts), so the API checks a file by the same rules
// before a job is queued.
export { resolveModule, underscored, type LoraKeyStyle, type LoraModelNames } from '../../catalog/loras';

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

/** diffusers' save_lora_weights metadata key (the PEFT LoraConfig as JSON). */
const ADAPTER_METADATA = 'lora_adapter_metadata';

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
 * Reads a LoRA file and maps it onto `names`' modules (catalog/loras.ts planLora: the keys and shapes; here the
 * alphas and the data). `others`: the other models Kiln knows, named in the refusal when the file's modules are theirs.
 */
export async function readLora(path: string, names: LoraModelNames, others: readonly LoraModelNames[] = []): Promise<LoraFile> {
  const ckpt = await Checkpoint.open(path);
  try {
    const plan = planLora(path, new Map(ckpt.keys().map((k) => [k, ckpt.entry(k).shape])), names, others);
    if ('problem' in plan) throw new LoraError(plan.problem);
    const alphaOf = metadataAlpha(ckpt.metadata, path);
    const pairs = new Map<string, LoraPair>();
    let bytes = 0;
    const ups = new Map<string, Float32Array>(); // a fused stem's up, read once for its parts
    for (const { module, source, down: dk, up: uk, alpha: ak, rank, rows } of plan.pairs) {
      let alpha: number | undefined;
      if (ak) {
        const a = await ckpt.readFloat32(ak);
        if (a.length !== 1) throw new LoraError(`${path}: ${ak} holds ${a.length} values, not one`);
        alpha = a[0]!;
      } else alpha = alphaOf?.(source.replace(/^transformer\./, ''), rank);
      if (alpha !== undefined && !(Number.isFinite(alpha) && alpha > 0)) throw new LoraError(`${path}: ${source}: alpha ${alpha} is not a positive number`);
      const down = await ckpt.readFloat32(dk);
      let up: Float32Array;
      if (rows) {
        // a fused stem's part (catalog/loras.ts LoraFusedModule): these rows of the file's up [N, r], in order
        let full = ups.get(uk);
        if (!full) ups.set(uk, (full = await ckpt.readFloat32(uk)));
        up = new Float32Array(rows.reduce((n, [a, b]) => n + (b - a), 0) * rank);
        let at = 0;
        for (const [a, b] of rows) {
          up.set(full.subarray(a * rank, b * rank), at);
          at += (b - a) * rank;
        }
      } else up = await ckpt.readFloat32(uk);
      bytes += (down.length + up.length) * 4;
      pairs.set(module, { module, source, down, up, rank, alpha, factor: alpha === undefined ? 1 : alpha / rank });
    }
    return { path, model: names.model, style: plan.style, pairs, bytes };
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
